package podip

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// TestLeakWhoseAddressASandboxUsesIsHandedOver: allocations of gone
// sandboxes (as an outdated checkpoint restores them) whose addresses
// running sandboxes use are never freed, not even for an exhausted ADD;
// the decision, on any path, hands each over to its READY user, and waits
// while the user is not ready.
func TestLeakWhoseAddressASandboxUsesIsHandedOver(t *testing.T) {
	f := newReconFixture(t)
	for _, name := range []string{"a", "b", "c"} {
		f.pod(t, name, false) // so that two leaks are no mass release
	}
	stale := f.pod(t, "stale", true)
	waiting := f.pod(t, "stale-2", true)
	user := fakecri.Sandbox{ID: "1111111111111111111111111111111111111111111111111111111111111111", Name: "web", Namespace: "prod",
		IP: stale.IP.String(), State: runtimeapi.PodSandboxState_SANDBOX_READY}
	notReady := fakecri.Sandbox{ID: "2222222222222222222222222222222222222222222222222222222222222222", Name: "db", Namespace: "prod",
		IP: waiting.IP.String(), State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
	f.rt.Add(user)
	f.rt.Add(notReady)
	keyOf := func(s fakecri.Sandbox) datastore.IPAMKey {
		return datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: s.ID, IfName: "eth0"}
	}

	f.clk.Advance(6 * time.Minute) // past the grace period
	f.r.cfg.Mode = Report          // report mode hands nothing over: first the ADD
	rep := f.pass(t)
	require.Equal(t, 2, rep.Candidates)
	usedBy := map[string]string{}
	for _, c := range f.r.Status().Candidates {
		usedBy[c.IP] = c.UsedBy
	}
	assert.Equal(t, map[string]string{stale.IP.String(): user.ID, waiting.IP.String(): notReady.ID}, usedBy,
		"/v1/reconciler names the sandbox each kept address is kept for")
	f.r.cfg.Mode = Enforce
	f.clk.Advance(time.Minute) // past the cooldown
	assert.False(t, f.r.ReclaimForAdd(context.Background()), "an exhausted ADD never gets an address a sandbox uses")
	assert.False(t, f.held(stale), "it hands the address over instead")
	assert.True(t, f.held(waiting))
	got, ok := f.store.Find(keyOf(user))
	require.True(t, ok, "the running sandbox holds its address")
	assert.Equal(t, stale.IP, got.IP)

	rep = f.pass(t)
	assert.Zero(t, rep.HandedOver, "done already")
	assert.Zero(t, rep.Reclaimed)
	assert.False(t, f.held(stale))
	got, ok = f.store.Find(keyOf(user))
	require.True(t, ok, "the running sandbox holds its address")
	assert.Equal(t, stale.IP, got.IP)
	assert.Equal(t, "web", got.Metadata.K8SPodName)
	inPool, free := f.store.Holds(stale.IP)
	assert.True(t, inPool && !free, "never free, never cooling")
	assert.Zero(t, f.store.Stats().CooldownIPs)
	assert.True(t, f.held(waiting), "a sandbox that is not ready leaves the old allocation alone")
	assert.Equal(t, 1, f.events.count("PodIPReadopted"))

	f.rt.SetState(notReady.ID, runtimeapi.PodSandboxState_SANDBOX_READY)
	f.clk.Advance(time.Minute)
	rep = f.pass(t)
	assert.Equal(t, 1, rep.HandedOver)
	got, ok = f.store.Find(keyOf(notReady))
	require.True(t, ok, "handed over once ready")
	assert.Equal(t, waiting.IP, got.IP)
	assert.False(t, f.held(waiting))
}

// TestHandOverRefusedKeepsTheCandidate: the running sandbox that uses a
// leak's address already holds another one, so the hand-over is refused
// (datastore.ErrKeyExists). The leak stays held and stays a confirmed
// candidate, pass after pass: it is neither freed nor confirmed afresh.
func TestHandOverRefusedKeepsTheCandidate(t *testing.T) {
	f := newReconFixture(t)
	for _, name := range []string{"a", "b", "c"} {
		f.pod(t, name, false)
	}
	stale := f.pod(t, "stale", true)
	web := f.pod(t, "web", false)
	f.rt.ShowWithIP(web.Key.ContainerID, stale.IP.String()) // it reports the leak's address

	f.clk.Advance(6 * time.Minute)
	require.Equal(t, 1, f.pass(t).Candidates)
	for range 3 {
		f.clk.Advance(time.Minute)
		rep := f.pass(t)
		assert.Zero(t, rep.Readopted)
		assert.Zero(t, rep.Reclaimed)
		assert.Equal(t, 1, rep.Candidates, "kept as a candidate")
		assert.True(t, f.held(stale))
		assert.True(t, f.held(web))
	}
}

// TestHandOversAreNotBraked: after an old checkpoint came back, most
// allocations belong to gone sandboxes whose addresses running pods use.
// Handing those over frees nothing, so neither the mass-release hold nor
// the per-pass cap delays it: all are handed over on the first pass that
// confirms them.
func TestHandOversAreNotBraked(t *testing.T) {
	f := newReconFixture(t, func(c *Config) { c.MaxReleasePerPass = 1 })
	f.pod(t, "live", false)
	var stale []datastore.Allocation
	for i := range 4 {
		a := f.pod(t, fmt.Sprint("stale-", i), true)
		stale = append(stale, a)
		f.rt.Add(fakecri.Sandbox{ID: fmt.Sprintf("%064d", i+100), Name: fmt.Sprint("web-", i), Namespace: "prod",
			IP: a.IP.String(), State: runtimeapi.PodSandboxState_SANDBOX_READY})
	}
	f.clk.Advance(6 * time.Minute)
	rep := f.pass(t)
	assert.Empty(t, rep.Skipped, "nothing is freed, so nothing is braked")
	assert.Equal(t, 4, rep.HandedOver, "all handed over, past the cap of 1")
	assert.Zero(t, rep.Reclaimed)
	for i, a := range stale {
		got, ok := f.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("%064d", i+100), IfName: "eth0"})
		require.True(t, ok)
		assert.Equal(t, a.IP, got.IP)
	}
}
