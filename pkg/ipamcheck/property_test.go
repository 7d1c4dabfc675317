package ipamcheck_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamcheck"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
)

// propPod is one sandbox of the world.
type propPod struct {
	id                                   string
	alive, ready, omitted, failing, seen bool   // seen: ipamd learnt the address it uses
	hasUser                              bool   // dead, and a sandbox uses its address
	usesLeakOf                           string // holds no allocation; uses this dead pod's address
}

// propWorld is the runtime's truth, and ipamd's sandbox source.
type propWorld struct {
	mu      sync.Mutex
	pods    []*propPod
	foreign bool // the next list comes from a runtime that is not this node's
	store   *datastore.DataStore
	clk     *clocktest.Clock
}

func (w *propWorld) pod(id string) *propPod {
	for _, p := range w.pods {
		if p.id == id {
			return p
		}
	}
	return nil
}

// addr is the address p uses, if any.
func (w *propWorld) addr(p *propPod) (netip.Addr, bool) {
	if p == nil {
		return netip.Addr{}, false
	}
	id := p.id
	if p.usesLeakOf != "" {
		id = p.usesLeakOf
	}
	a, ok := w.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"})
	return a.IP, ok
}

func (w *propWorld) ListSandboxes(context.Context) ([]podip.Sandbox, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.foreign {
		return []podip.Sandbox{{ID: "foreign-1", Name: "other", Namespace: "default", Ready: true}}, nil
	}
	out := []podip.Sandbox{{ID: "self", Name: "aws-node-prop", Namespace: "kube-system", Ready: true}}
	for _, p := range w.pods {
		if p.alive && !p.omitted {
			out = append(out, podip.Sandbox{ID: p.id, Name: p.id[60:], Namespace: "prop", Ready: p.ready})
		}
	}
	return out, nil
}

func (w *propWorld) SandboxStatus(_ context.Context, id string) (podip.SandboxStatus, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id == "self" || id == "foreign-1" {
		return podip.SandboxStatus{Sandbox: podip.Sandbox{ID: id, Ready: true}}, nil
	}
	p := w.pod(id)
	switch {
	case w.foreign || p == nil || !p.alive:
		return podip.SandboxStatus{}, fmt.Errorf("sandbox %s: %w", id, podip.ErrSandboxNotFound)
	case p.failing:
		return podip.SandboxStatus{}, errors.New("injected status failure")
	}
	st := podip.SandboxStatus{Sandbox: podip.Sandbox{ID: p.id, Name: p.id[60:], Namespace: "prop", Ready: p.ready}}
	if ip, ok := w.addr(p); ok {
		st.IPs, p.seen = []netip.Addr{ip}, true
	}
	return st, nil
}

// start runs a new pod and assigns its address: an hour ago (past the
// grace period) or, now and then, just now (its ADD may be in flight).
func (w *propWorld) start(t *testing.T, rng *rand.Rand) {
	if w.store.Stats().AssignableIPs() <= 0 {
		return
	}
	p := &propPod{id: fmt.Sprintf("%064d", len(w.pods)+1), alive: true, ready: true}
	w.clk.Set(time.Now().Add(-time.Duration(min(rng.IntN(6), 1)) * time.Hour))
	_, err := w.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: p.id, IfName: "eth0"}, datastore.IPAMMetadata{K8SPodNamespace: "prop", K8SPodName: p.id[60:]})
	require.NoError(t, err)
	w.pods = append(w.pods, p)
}

// step changes the world at random. A sandbox using a leak's address is
// left out of a list only once ipamd learnt that address: one whose use it
// never learnt cannot be told from none.
func (w *propWorld) step(t *testing.T, rng *rand.Rand) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.pods {
		if !p.alive {
			continue
		}
		switch rng.IntN(12) {
		case 0: // ends, its DEL lost
			p.alive = false
		case 1:
			p.omitted = !p.omitted && (p.usesLeakOf == "" || p.seen)
		case 2:
			p.failing = !p.failing
		case 3:
			p.ready = !p.ready
		}
	}
	for range rng.IntN(3) {
		w.start(t, rng)
	}
	if rng.IntN(3) == 0 { // a sandbox holding no allocation uses a dead pod's address
		for _, p := range w.pods {
			if !p.alive && p.usesLeakOf == "" && !p.hasUser && rng.IntN(3) == 0 {
				p.hasUser = true
				w.pods = append(w.pods, &propPod{id: fmt.Sprintf("%064d", len(w.pods)+1), alive: true, ready: rng.IntN(2) == 0, usesLeakOf: p.id})
				break
			}
		}
	}
	w.foreign = rng.IntN(8) == 0
}

func (w *propWorld) String() string {
	var b strings.Builder
	for _, p := range w.pods {
		ip, _ := w.addr(p)
		fmt.Fprintf(&b, "\n  %s %s alive=%v ready=%v omitted=%v failing=%v seen=%v usesLeakOf=%s",
			p.id[60:], ip, p.alive, p.ready, p.omitted, p.failing, p.seen, strings.TrimLeft(p.usesLeakOf, "0"))
	}
	return fmt.Sprintf("foreign=%v%s", w.foreign, b.String())
}

// ipam-check joins the cross-path property of pkg/ipamd/podip
// (TestEveryPathDecidesAlike): a random world (pods ending without their
// DEL, partial lists, failing status calls, READY and NOTREADY sandboxes,
// sandboxes holding no allocation that use a leak's address, a foreign
// runtime's list now and then) drives a report-mode reconciler, and after
// each pass ipam-check classifies the pool on ipamd's status and a list of
// its own, itself partial. It calls no address a live sandbox holds or
// uses (once ipamd learnt that use) a confirmed leak; a confirmed leak
// is an allocation whose sandbox the runtime no longer has and that ipamd
// confirmed; an address in use is used by the live sandbox the row names.
func TestIpamCheckAgreesWithEveryPath(t *testing.T) {
	trials := 40
	if testing.Short() {
		trials = 10
	}
	for trial := range trials {
		rng := rand.New(rand.NewPCG(35, uint64(trial)))
		w := &propWorld{clk: clocktest.New()}
		w.store = datastore.New(datastore.Config{Now: w.clk.Now, Cooldown: 30 * time.Second})
		t.Cleanup(func() { w.store.Close() })
		require.NoError(t, devpool.Pool{ENIs: 3, PerENI: 10}.Populate(w.store))
		// The reconciler reads the real clock: allocations are an hour
		// old (past a 10-minute grace) or new (within it), never near it.
		r := podip.New(podip.Config{Mode: podip.Report, PodName: "aws-node-prop", Grace: 10 * time.Minute}, w, w.store, nil, nil, nil)
		for range 10 + rng.IntN(15) {
			w.start(t, rng)
		}
		for s := range 3 + rng.IntN(10) {
			w.step(t, rng)
			rep := r.Pass(t.Context(), false)
			st := r.Introspect()
			grace, err := time.ParseDuration(st.Grace)
			require.NoError(t, err)
			cooldown, _ := time.ParseDuration(st.IPCooldown)
			in := ipamcheck.Input{Now: time.Now(), Sandboxes: w.checksList(rng.IntN), ENIs: w.store.ENIInfos(),
				Reconciler: st, Grace: grace, Cooldown: cooldown}
			res := ipamcheck.Classify(in)
			if why := w.disagreement(res, st); why != "" {
				t.Errorf("trial %d, step %d (pass skipped %q): %s\nworld: %v", trial, s, rep.Skipped, why, w)
				break
			}
			if why := sameOnTwoCards(in, res); why != "" {
				t.Errorf("trial %d, step %d: %s\nworld: %v", trial, s, why, w)
				break
			}
		}
	}
}

// checksList is ipam-check's own list of the world: partial too.
func (w *propWorld) checksList(intN func(int) int) []cri.Sandbox {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := []cri.Sandbox{{ID: "self", Name: "aws-node-prop", Namespace: "kube-system", Ready: true}}
	for _, p := range w.pods {
		if p.alive && intN(4) > 0 {
			out = append(out, cri.Sandbox{ID: p.id, Name: p.id[60:], Namespace: "prop", Ready: p.ready})
		}
	}
	return out
}

func rowText(r ipamcheck.Row) string {
	return fmt.Sprintf("%s of %s: %s confirmed=%v addressUse=%s usedBy=%s held=%q", r.Address, r.PodName, r.Verdict, r.Confirmed, r.AddressUse,
		strings.TrimLeft(r.UsedBy, "0"), r.HeldBecause)
}

// disagreement is the first row of res that the world or ipamd's status
// st contradicts ("" when none).
func (w *propWorld) disagreement(res ipamcheck.Result, st podip.Status) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	confirmed := map[string]bool{} // by container ID and address
	for _, c := range st.Candidates {
		confirmed[c.ContainerID+c.IP] = c.Confirmed
	}
	for _, row := range res.Addresses {
		switch row.Verdict {
		case ipamcheck.LeakedCandidate:
			if !row.Leak() {
				continue
			}
			for _, p := range w.pods {
				// Its own sandbox (the runtime has it), or a user of its address.
				if ip, _ := w.addr(p); p.alive && (p.id == row.ContainerID || p.seen && ip.String() == row.Address) {
					return fmt.Sprintf("a confirmed leak that live sandbox %s holds or uses: %s", p.id[60:], rowText(row))
				}
			}
			if !confirmed[row.ContainerID+row.Address] {
				return fmt.Sprintf("a confirmed leak ipamd did not confirm: %s", rowText(row))
			}
		case ipamcheck.InUse:
			p := w.pod(row.UsedBy)
			if ip, _ := w.addr(p); p == nil || !p.alive || ip.String() != row.Address {
				return fmt.Sprintf("in use by a sandbox that is gone or uses another address: %s", rowText(row))
			}
		}
	}
	return ""
}

// sameOnTwoCards classifies in (whose result is res) again as if one of
// its ENIs were network card 1's (its allocations naming card 1, as the merged
// /v1/reconciler serves them): the verdicts must be res's, and every row
// must name its ENI's card ("" when so).
func sameOnTwoCards(in ipamcheck.Input, res ipamcheck.Result) string {
	moved := "" // the first allocation's ENI, else the last ENI
	for id := range in.ENIs.ENIs {
		moved = max(moved, id)
	}
	if len(in.Reconciler.Allocations) > 0 {
		moved = in.Reconciler.Allocations[0].ENI
	}
	cards := map[string]int{moved: 1}
	split := in.Reconciler
	split.Allocations = slices.Clone(split.Allocations)
	for i, a := range split.Allocations {
		split.Allocations[i].NetworkCard = cards[a.ENI]
	}
	in.ENICards, in.Reconciler = cards, split
	two := ipamcheck.Classify(in)
	if !reflect.DeepEqual(two.Summary, res.Summary) {
		return fmt.Sprintf("on two cards the summary is %+v, on one %+v", two.Summary, res.Summary)
	}
	verdicts := map[string]ipamcheck.Verdict{}
	for _, r := range res.Addresses {
		verdicts[r.Address] = r.Verdict
	}
	for _, r := range two.Addresses {
		if verdicts[r.Address] != r.Verdict {
			return fmt.Sprintf("on two cards %s is %s, on one %s", r.Address, r.Verdict, verdicts[r.Address])
		}
		if r.NetworkCard == nil || *r.NetworkCard != cards[r.ENI] {
			return fmt.Sprintf("%s on %s does not name card %d", r.Address, r.ENI, cards[r.ENI])
		}
	}
	return ""
}
