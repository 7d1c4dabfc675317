package podip

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
)

// The cross-path property for addresses that join the pool: sandboxes use
// addresses of an ENI that leaves the pool and joins again (by force, as
// the ENI sync does), while the runtime answers at random: partial lists
// that leave a user out, failing status calls, NOTREADY sandboxes that
// still report their address or no longer do, a foreign runtime's list.
// Whatever the pass, the check of joining addresses, the exhausted-ADD
// reclaim and CNI GC do, no address a live sandbox reports is ever free
// to hand out, unless no list ever showed that sandbox (nothing can tell
// it from none). And once the runtime answers fully again, every address
// no sandbox uses is free or assigned: nothing waits for good.

// joinPod is one sandbox of the joining-address world.
type joinPod struct {
	id      string
	ip      netip.Addr // the address it uses (on ENI 1)
	alive   bool
	ready   bool
	tornOff bool // NOTREADY and torn down: reports no IP
	omitted bool
	failing bool
	seen    bool // a list has shown it
}

type joinWorld struct {
	mu      sync.Mutex
	pods    []*joinPod
	foreign bool
}

func (w *joinWorld) ListSandboxes(context.Context) ([]Sandbox, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.foreign {
		return []Sandbox{{ID: "foreign-1", Name: "other", Namespace: "default", Ready: true}}, nil
	}
	out := []Sandbox{{ID: "self", Name: "aws-node-prop", Namespace: "kube-system", Ready: true}}
	for _, p := range w.pods {
		if p.alive && !p.omitted {
			p.seen = true
			out = append(out, Sandbox{ID: p.id, Name: p.id, Namespace: "prop", Ready: p.ready})
		}
	}
	return out, nil
}

func (w *joinWorld) SandboxStatus(_ context.Context, id string) (SandboxStatus, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id == "self" || id == "foreign-1" {
		return SandboxStatus{Sandbox: Sandbox{ID: id, Ready: true}}, nil
	}
	for _, p := range w.pods {
		if p.id != id || w.foreign || !p.alive {
			continue
		}
		if p.failing {
			return SandboxStatus{}, errors.New("injected status failure")
		}
		st := SandboxStatus{Sandbox: Sandbox{ID: p.id, Name: p.id, Namespace: "prop", Ready: p.ready}}
		if p.reports() {
			st.IPs = []netip.Addr{p.ip}
		}
		return st, nil
	}
	return SandboxStatus{}, fmt.Errorf("sandbox %s: %w", id, ErrSandboxNotFound)
}

// reports says whether the sandbox reports its address (requires w.mu).
func (p *joinPod) reports() bool { return p.alive && (p.ready || !p.tornOff) }

const eni1 = "eni-dev0000000000001"

func eni1Addr(j int) netip.Addr { return netip.AddrFrom4([4]byte{10, 250, 1, byte(j + 1)}) }

func TestNoJoiningAddressIsHandedOutWhileASandboxUsesIt(t *testing.T) {
	trials := 120
	if testing.Short() {
		trials = 25
	}
	ctx := context.Background()
	const perENI = 8
	for trial := range trials {
		rng := rand.New(rand.NewPCG(35, uint64(trial)))
		clk := clocktest.New()
		store := datastore.New(datastore.Config{Now: clk.Now, Cooldown: 30 * time.Second, VerifyNewAddresses: true})
		require.NoError(t, devpool.Pool{ENIs: 2, PerENI: perENI}.Populate(store))
		w := &joinWorld{}
		r := New(Config{Mode: Enforce, PodName: "aws-node-prop"}, w, store, nil, nil, nil)
		r.now = clk.Now
		r.SetCleanStart(true)
		_, err := r.VerifyNow(ctx)
		require.NoError(t, err)
		// Pods on ENI 1: some through an ADD (holding an allocation),
		// some using an address no allocation holds (an old checkpoint).
		for j := range perENI {
			if rng.IntN(3) == 0 {
				continue
			}
			p := &joinPod{id: fmt.Sprintf("%064d", j+1), ip: eni1Addr(j), alive: true, ready: true}
			if rng.IntN(2) == 0 {
				_, err := store.Adopt(p.ip, key(p.id), datastore.IPAMMetadata{K8SPodNamespace: "prop", K8SPodName: p.id})
				require.NoError(t, err)
			}
			w.pods = append(w.pods, p)
		}
		r.Pass(ctx, false) // the runtime answers fully once

		check := func(step string) {
			w.mu.Lock()
			defer w.mu.Unlock()
			for _, p := range w.pods {
				if !p.reports() || !p.seen {
					continue
				}
				if inPool, free := store.Holds(p.ip); inPool && free {
					t.Fatalf("trial %d, %s: %s is free while sandbox %s (ready %v, omitted %v, failing %v) uses it",
						trial, step, p.ip, p.id[60:], p.ready, p.omitted, p.failing)
				}
			}
		}
		for step := range 4 + rng.IntN(12) {
			w.mu.Lock()
			for _, p := range w.pods {
				switch rng.IntN(10) {
				case 0:
					p.alive = false
				case 1:
					p.omitted = !p.omitted
				case 2:
					p.failing = !p.failing
				case 3: // stops (a stopped sandbox never runs again)
					p.ready = false
				case 4: // its network is torn down
					p.tornOff = !p.ready
				}
			}
			w.foreign = rng.IntN(5) == 0
			w.mu.Unlock()
			// ENI 1's addresses leave by force and join again.
			for j := range perENI {
				if rng.IntN(3) == 0 {
					c := netip.PrefixFrom(eni1Addr(j), 32)
					if _, err := store.RemoveCIDR(eni1, c, true); err == nil {
						require.NoError(t, store.AddCIDR(eni1, c))
					}
				}
			}
			clk.Advance(time.Duration(10+rng.IntN(120)) * time.Second)
			switch rng.IntN(4) {
			case 0:
				_, _ = r.VerifyNow(ctx)
			case 1:
				r.ReclaimForAdd(ctx)
			case 2:
				r.CollectGarbage(ctx, "aws-cni", map[[2]string]bool{})
			default:
				r.Pass(ctx, false)
			}
			check(fmt.Sprint("step ", step))
		}

		// The runtime answers fully again: nothing waits for good.
		w.mu.Lock()
		w.foreign = false
		for _, p := range w.pods {
			p.omitted, p.failing = false, false
		}
		w.mu.Unlock()
		for range 3 {
			clk.Advance(time.Minute)
			r.Pass(ctx, false)
		}
		check("after recovery")
		w.mu.Lock()
		using := map[netip.Addr]bool{}
		for _, p := range w.pods {
			if p.reports() {
				using[p.ip] = true
			}
		}
		w.mu.Unlock()
		for _, p := range store.PendingAddresses() {
			require.True(t, using[p.IP], "trial %d: %s waits although no sandbox uses it (%+v)", trial, p.IP, r.Status().PendingReason)
		}
		store.Close()
	}
}
