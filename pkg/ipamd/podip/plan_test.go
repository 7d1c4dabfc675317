package podip

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// The rules of docs/pod-ip-reconciler.md, "Is this address in use? One
// answer", and what each path does with it, as pure tables: no runtime,
// no datastore, no gRPC.

var (
	ipA = netip.MustParseAddr("10.0.0.1")
	ipB = netip.MustParseAddr("10.0.0.2")
)

func TestOneAnswerToIsThisAddressInUse(t *testing.T) {
	ready := Sandbox{ID: "ready", Ready: true}
	stopping := Sandbox{ID: "stopping"}
	unknown := Sandbox{ID: "unknown-ips"}
	for _, tc := range []struct {
		name string
		ev   addrEvidence
		want Use
		by   string
	}{
		{"no evidence: unused", addrEvidence{}, Unused, ""},
		{"a listed READY sandbox reports it", addrEvidence{users: map[netip.Addr]Sandbox{ipA: ready}}, UsedReady, "ready"},
		{"a listed NOTREADY sandbox still reports it", addrEvidence{users: map[netip.Addr]Sandbox{ipA: stopping}}, UsedNotReady, "stopping"},
		{"a listed sandbox reports another address", addrEvidence{users: map[netip.Addr]Sandbox{ipB: ready}}, Unused, ""},
		{"a last known user reports it when asked by its ID", addrEvidence{lastAlive: map[netip.Addr]Sandbox{ipA: ready}}, UsedReady, "ready"},
		{"a last known user did not answer", addrEvidence{lastUnknown: map[netip.Addr]string{ipA: "gone-quiet"}}, UseUnknown, "gone-quiet"},
		{"a last known user of another address did not answer", addrEvidence{lastUnknown: map[netip.Addr]string{ipB: "x"}}, Unused, ""},
		{"a listed sandbox holding no allocation has unknown IPs", addrEvidence{unknown: &unknown}, UseUnknown, "unknown-ips"},
		{"a listed user outweighs an unknown one", addrEvidence{users: map[netip.Addr]Sandbox{ipA: ready}, unknown: &unknown}, UsedReady, "ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			use, s, _ := tc.ev.useOf(ipA)
			assert.Equal(t, tc.want, use)
			assert.Equal(t, tc.by, s.ID)
		})
	}
}

func TestAPrefixJoinsWhenNoneOfItsAddressesIsOfUnknownUse(t *testing.T) {
	p := netip.MustParsePrefix("2001:db8::/80")
	in, out := netip.MustParseAddr("2001:db8::5"), netip.MustParseAddr("2001:db8:1::5")
	ready := Sandbox{ID: "ready", Ready: true}
	for _, tc := range []struct {
		name    string
		ev      addrEvidence
		used    int
		unknown bool
	}{
		{"nothing uses it", addrEvidence{}, 0, false},
		{"a listed sandbox uses an address in it", addrEvidence{users: map[netip.Addr]Sandbox{in: ready, out: ready}}, 1, false},
		{"a last known user in it did not answer", addrEvidence{lastUnknown: map[netip.Addr]string{in: "x"}}, 0, true},
		{"a last known user outside it did not answer", addrEvidence{lastUnknown: map[netip.Addr]string{out: "x"}}, 0, false},
		{"a listed sandbox's IPs are unknown", addrEvidence{unknown: &Sandbox{ID: "u"}}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			used, unknown := tc.ev.usesIn(p)
			assert.Len(t, used, tc.used)
			assert.Equal(t, tc.unknown, unknown != "")
		})
	}
}

func TestAJoiningAddressIsHandedOutOnlyWhenUnused(t *testing.T) {
	ready, stopping := Sandbox{ID: "r", Ready: true}, Sandbox{ID: "s"}
	for _, tc := range []struct {
		name    string
		ev      addrEvidence
		enforce bool
		act     verifyAct
		reason  string
	}{
		{"unused: verified free", addrEvidence{}, true, actVerify, ""},
		{"a READY sandbox uses it: adopted", addrEvidence{users: map[netip.Addr]Sandbox{ipA: ready}}, true, actAdopt, ""},
		{"report mode: a READY sandbox uses it: waits", addrEvidence{users: map[netip.Addr]Sandbox{ipA: ready}}, false, actWait, WaitInUse},
		{"a NOTREADY sandbox still reports it: waits", addrEvidence{users: map[netip.Addr]Sandbox{ipA: stopping}}, true, actWait, WaitInUse},
		{"its use is unknown: waits", addrEvidence{lastUnknown: map[netip.Addr]string{ipA: "x"}}, true, actWait, WaitStatuses},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := planVerify([]datastore.Pending{{IP: ipA}, {Prefix: netip.MustParsePrefix("2001:db8::/80")}}, &tc.ev, tc.enforce)
			assert.Len(t, steps, 1, "whole prefixes are settled apart")
			assert.Equal(t, tc.act, steps[0].act)
			assert.Equal(t, tc.reason, steps[0].reason)
		})
	}
}

func TestALeakIsFreedOnlyWhenItsSandboxIsGoneAndItsAddressUnused(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cooldown := 30 * time.Second
	cand := func(id string, ip netip.Addr) *candidate {
		return &candidate{alloc: datastore.Allocation{Key: datastore.IPAMKey{ContainerID: id}, IP: ip}}
	}
	goneSince := func(d time.Duration) func(string) (time.Time, bool) {
		return func(string) (time.Time, bool) { return now.Add(-d), true }
	}
	for _, tc := range []struct {
		name       string
		ans        answer
		asked      bool
		ev         addrEvidence
		gone       time.Duration
		restedOnly bool
		act        releaseAct
		rested     bool
	}{
		{"not asked: kept", 0, false, addrEvidence{}, time.Minute, false, actKeep, false},
		{"its sandbox did not answer: kept", answerUnknown, true, addrEvidence{}, time.Minute, false, actKeep, false},
		{"its sandbox answered (a partial list): forgotten", answerAlive, true, addrEvidence{}, time.Minute, false, actForget, false},
		{"gone, unused, rested: freed at once", answerGone, true, addrEvidence{}, time.Minute, false, actFree, true},
		{"gone, unused, not rested: freed to rest", answerGone, true, addrEvidence{}, time.Second, false, actFree, false},
		{"gone, unused, not rested, an ADD's: kept", answerGone, true, addrEvidence{}, time.Second, true, actKeep, false},
		{"gone, a READY sandbox uses it: handed over", answerGone, true, addrEvidence{lastAlive: map[netip.Addr]Sandbox{ipA: {ID: "u", Ready: true}}}, time.Minute, false, actHandOver, false},
		{"gone, a NOTREADY sandbox reports it: handed over when ready", answerGone, true, addrEvidence{users: map[netip.Addr]Sandbox{ipA: {ID: "u"}}}, time.Minute, false, actHandOver, false},
		{"gone, its use is unknown: kept", answerGone, true, addrEvidence{lastUnknown: map[netip.Addr]string{ipA: "u"}}, time.Minute, false, actKeep, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cand("leak", ipA)
			in := releaseInput{cands: []*candidate{c}, asked: map[*candidate]answer{}, goneAt: goneSince(tc.gone), use: &tc.ev,
				restedOnly: tc.restedOnly, cooldown: cooldown, now: now}
			if tc.asked {
				in.asked[c] = tc.ans
			}
			plan := planRelease(in)
			assert.Len(t, plan.steps, 1)
			assert.Equal(t, tc.act, plan.steps[0].act)
			assert.Equal(t, tc.rested, plan.steps[0].rested)
		})
	}
}

func TestAReleaseStopsAtItsLimit(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var cands []*candidate
	asked := map[*candidate]answer{}
	for i := range 5 {
		c := &candidate{alloc: datastore.Allocation{Key: datastore.IPAMKey{ContainerID: string(rune('a' + i))}, IP: netip.AddrFrom4([4]byte{10, 0, 1, byte(i)})}}
		cands = append(cands, c)
		asked[c] = answerGone
	}
	cands[1].counted = true // report mode counted it already
	gone := func(string) (time.Time, bool) { return now.Add(-time.Hour), true }
	for _, tc := range []struct {
		name   string
		limit  int
		report bool
		frees  int
		steps  int
		capped bool
	}{
		{"no limit: every leak", 0, false, 5, 5, false},
		{"a limit of two", 2, false, 2, 2, true},
		{"report mode: a counted leak does not use the limit up", 2, true, 2, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planRelease(releaseInput{cands: cands, asked: asked, goneAt: gone, use: &addrEvidence{}, report: tc.report,
				limit: tc.limit, cooldown: time.Second, now: now})
			assert.Equal(t, tc.frees, plan.frees)
			assert.Len(t, plan.steps, tc.steps)
			assert.Equal(t, tc.capped, plan.capped)
		})
	}
}
