package podip

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
)

// The cross-path property test: the pass, the reclaim for an exhausted
// ADD and CNI GC are driven against the same random runtime answers
// (partial lists, sandboxes flapping in and out of them, failing status
// calls, NOTREADY and READY sandboxes using a leak's address (listed, or
// left out of later lists), pods
// recreated with a new sandbox ID, a foreign runtime answering for up to
// two passes in a row), in identical worlds. No path may free an address a
// live sandbox holds or uses, no path frees what the pass would hold, and
// report mode counts every leak enforce mode frees, once.

// propPod is one pod sandbox of the random world.
type propPod struct {
	id, name string
	alive    bool
	ready    bool
	omitted  bool // a partial list leaves it out; asked by ID it answers
	failing  bool // its status call fails
	// seen: a list of the reconciler's has shown it.
	seen bool
	// usesLeakOf, when set, is the container ID of a leaked allocation
	// whose address this sandbox (which holds none) uses: an outdated
	// checkpoint.
	usesLeakOf string
}

// propWorld is the runtime's truth and the faults of its next answers.
type propWorld struct {
	mu      sync.Mutex
	pods    []*propPod
	foreign bool // the answers come from a runtime that is not this node's
	next    int
}

func (w *propWorld) pod(id string) *propPod {
	for _, p := range w.pods {
		if p.id == id {
			return p
		}
	}
	return nil
}

// propSource is one universe's view of the world: the same answers, with
// the addresses that universe's datastore gave.
type propSource struct {
	w     *propWorld
	store *datastore.DataStore
}

func (s *propSource) ipOf(p *propPod) (netip.Addr, bool) {
	id := p.id
	if p.usesLeakOf != "" {
		id = p.usesLeakOf
	}
	a, ok := s.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"})
	return a.IP, ok
}

func (s *propSource) ListSandboxes(context.Context) ([]Sandbox, error) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if s.w.foreign {
		return []Sandbox{{ID: "foreign-1", Name: "other", Namespace: "default", Ready: true}}, nil
	}
	out := []Sandbox{{ID: "self", Name: "aws-node-prop", Namespace: "kube-system", Ready: true}}
	for _, p := range s.w.pods {
		if p.alive && !p.omitted {
			out = append(out, Sandbox{ID: p.id, Name: p.name, Namespace: "prop", Ready: p.ready})
		}
	}
	return out, nil
}

func (s *propSource) SandboxStatus(_ context.Context, id string) (SandboxStatus, error) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if id == "self" || id == "foreign-1" {
		return SandboxStatus{Sandbox: Sandbox{ID: id, Ready: true}, IPs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}, nil
	}
	p := s.w.pod(id)
	switch {
	case s.w.foreign || p == nil || !p.alive:
		return SandboxStatus{}, fmt.Errorf("sandbox %s: %w", id, ErrSandboxNotFound)
	case p.failing:
		return SandboxStatus{}, errors.New("injected status failure")
	}
	st := SandboxStatus{Sandbox: Sandbox{ID: p.id, Name: p.name, Namespace: "prop", Ready: p.ready}}
	if ip, ok := s.ipOf(p); ok {
		st.IPs = []netip.Addr{ip}
	}
	return st, nil
}

// universe is one datastore and reconciler in the world.
type universe struct {
	store *datastore.DataStore
	r     *Reconciler
}

func newUniverse(t *testing.T, w *propWorld, clk *clocktest.Clock, mode Mode, enis int) *universe {
	store := datastore.New(datastore.Config{Now: clk.Now, Cooldown: 30 * time.Second})
	t.Cleanup(func() { store.Close() })
	require.NoError(t, devpool.Pool{ENIs: enis, PerENI: 10}.Populate(store))
	r := New(Config{Mode: mode, PodName: "aws-node-prop"}, &propSource{w: w, store: store}, store, nil, nil, nil)
	r.now = clk.Now
	return &universe{store: store, r: r}
}

func key(id string) datastore.IPAMKey {
	return datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"}
}

// start runs a new pod in the world and assigns its address in every
// universe, or in none when one has no address left (so that what the
// universes hold differs only by what the reconcilers did).
func (w *propWorld) start(t *testing.T, us ...*universe) *propPod {
	for _, u := range us {
		if u.store.Stats().AssignableIPs() <= 0 {
			return nil
		}
	}
	w.next++
	p := &propPod{id: fmt.Sprintf("%064d", w.next), name: fmt.Sprint("pod-", w.next), alive: true, ready: true}
	for _, u := range us {
		_, err := u.store.Assign(key(p.id), datastore.IPAMMetadata{K8SPodNamespace: "prop", K8SPodName: p.name})
		require.NoError(t, err)
	}
	w.pods = append(w.pods, p)
	return p
}

// step changes the world at random: pods end without their DEL, are
// recreated with a new sandbox ID, flap out of lists, fail their status
// calls, change state; a sandbox comes to use a leak's address; the runtime
// answers as another node's (never three times in a row).
func (w *propWorld) step(t *testing.T, rng *rand.Rand, foreignRun *int, withReadyUsers bool, us ...*universe) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range slices.Clone(w.pods) {
		if !p.alive || p.usesLeakOf != "" {
			if p.usesLeakOf != "" && p.alive {
				switch rng.IntN(6) {
				case 0:
					p.alive = false // the user is gone too
				case 1:
					p.ready = withReadyUsers && !p.ready
				case 2:
					p.omitted = p.seen && !p.omitted // a partial list leaves the user out
				case 3:
					// Its status call fails. Only where enforce and report
					// mode are not compared: in this world a user reports
					// the leak's address only while its universe holds it,
					// so a failing user blocks report mode alone.
					p.failing = withReadyUsers && !p.failing
				}
			}
			continue
		}
		switch rng.IntN(12) {
		case 0: // ends, its DEL lost
			p.alive = false
		case 1: // recreated: the old sandbox ends (DEL lost), a new one starts
			p.alive = false
			w.mu.Unlock()
			w.start(t, us...)
			w.mu.Lock()
		case 2:
			p.omitted = !p.omitted
		case 3:
			p.failing = !p.failing
		case 4:
			p.ready = !p.ready
		}
	}
	// A stale allocation's address used by a sandbox that holds none.
	if rng.IntN(4) == 0 {
		for _, p := range w.pods {
			if !p.alive && p.usesLeakOf == "" && rng.IntN(3) == 0 {
				w.next++
				w.pods = append(w.pods, &propPod{id: fmt.Sprintf("%064d", w.next), name: fmt.Sprint("user-", w.next), alive: true,
					ready: withReadyUsers && rng.IntN(2) == 0, usesLeakOf: p.id})
				break
			}
		}
	}
	w.foreign = *foreignRun < 2 && rng.IntN(8) == 0
	for _, p := range w.pods {
		// The pass after this step lists it: a user may be left out of a
		// later list (a sandbox no list ever showed, using an address its
		// own allocation does not hold, cannot be told from none).
		p.seen = p.seen || !w.foreign && !p.omitted
	}
	if w.foreign {
		*foreignRun++
	} else {
		*foreignRun = 0
	}
}

// liveKeys are the allocations a live sandbox holds or uses, in u.
func (w *propWorld) liveKeys(u *universe) map[datastore.IPAMKey]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	live := map[datastore.IPAMKey]bool{}
	for _, p := range w.pods {
		if !p.alive {
			continue
		}
		id := p.id
		if p.usesLeakOf != "" {
			id = p.usesLeakOf
		}
		live[key(id)] = true
	}
	return live
}

// freedBy runs f and returns the allocations that left u's datastore
// (nothing else releases in this world; a hand-over moves the address to
// its user's key, which is no free).
func freedBy(u *universe, f func()) map[datastore.IPAMKey]datastore.Allocation {
	before := map[datastore.IPAMKey]datastore.Allocation{}
	for _, a := range u.store.Allocations() {
		before[a.Key] = a
	}
	f()
	for _, a := range u.store.Allocations() {
		delete(before, a.Key)
		for k, b := range before {
			if b.IP == a.IP { // handed over, not freed
				delete(before, k)
			}
		}
	}
	return before
}

func TestEveryPathDecidesAlike(t *testing.T) {
	trials := 150
	if testing.Short() {
		trials = 30
	}
	ctx := context.Background()
	for trial := range trials {
		rng := rand.New(rand.NewPCG(24+1*1000, uint64(trial)))
		clk := clocktest.New()
		w := &propWorld{}
		// P runs the pass, A the reclaim for an ADD, G CNI GC. The history
		// runs in report mode, which frees nothing, so the three are
		// identical up to the step that compares them.
		p, a, g := newUniverse(t, w, clk, Report, 3), newUniverse(t, w, clk, Report, 3), newUniverse(t, w, clk, Report, 3)
		for range 10 + rng.IntN(15) {
			w.start(t, p, a, g)
		}
		foreign := 0
		steps := 2 + rng.IntN(8)
		for s := range steps {
			w.step(t, rng, &foreign, true, p, a, g)
			clk.Advance(time.Duration(10+rng.IntN(300)) * time.Second)
			if s == steps-1 {
				break
			}
			for _, u := range []*universe{p, a, g} {
				u.r.Pass(ctx, false)
			}
		}
		for _, u := range []*universe{p, a, g} {
			u.r.cfg.Mode = Enforce
		}
		var rep PassReport
		freedP := freedBy(p, func() { rep = p.r.Pass(ctx, false) })
		freedA := freedBy(a, func() { a.r.ReclaimForAdd(ctx) })
		valid := map[[2]string]bool{}
		w.mu.Lock()
		for _, pod := range w.pods {
			if pod.alive && pod.usesLeakOf == "" && rng.IntN(5) > 0 { // GC's runtime forgets some live ones too
				valid[[2]string{pod.id, "eth0"}] = true
			}
		}
		w.mu.Unlock()
		freedG := freedBy(g, func() { g.r.CollectGarbage(ctx, "aws-cni", valid) })

		// What the pass would free but for its cap.
		wouldP := map[datastore.IPAMKey]bool{}
		for k := range freedP {
			wouldP[k] = true
		}
		p.r.mu.Lock()
		for k, c := range p.r.candidates {
			if _, gone := p.r.view.goneAt(c.alloc.Key.ContainerID); gone && rep.Capped {
				wouldP[k] = true
			}
		}
		p.r.mu.Unlock()
		where := fmt.Sprintf("trial %d (pass skipped %q, capped %v)", trial, rep.Skipped, rep.Capped)
		for name, u := range map[string]*universe{"pass": p, "ADD": a, "GC": g} {
			live := w.liveKeys(u)
			freed := map[string]map[datastore.IPAMKey]datastore.Allocation{"pass": freedP, "ADD": freedA, "GC": freedG}[name]
			for k := range freed {
				require.False(t, live[k], "%s: the %s freed %s, which a live sandbox holds or uses", where, name, k.ContainerID)
				require.True(t, wouldP[k], "%s: the %s freed %s, which the pass holds", where, name, k.ContainerID)
			}
		}
		require.LessOrEqual(t, len(freedA), 1, "%s: an ADD frees one address", where)
		for k := range freedG {
			require.False(t, valid[[2]string{k.ContainerID, k.IfName}], "%s: GC freed an attachment its runtime named", where)
		}
	}
}

// Report mode counts every leak that enforce mode frees, once, over a run
// of random runtime answers.
func TestReportModeCountsWhatEnforceFrees(t *testing.T) {
	trials := 60
	if testing.Short() {
		trials = 15
	}
	ctx := context.Background()
	for trial := range trials {
		rng := rand.New(rand.NewPCG(42, uint64(trial)))
		clk := clocktest.New()
		w := &propWorld{}
		// Report mode holds every leak: a pool large enough that new pods
		// start in both.
		e, r := newUniverse(t, w, clk, Enforce, 12), newUniverse(t, w, clk, Report, 12)
		for range 10 + rng.IntN(15) {
			w.start(t, e, r)
		}
		freed := map[datastore.IPAMKey]bool{}
		foreign := 0
		for range 5 + rng.IntN(20) {
			// No READY user of a leak's address: enforce mode would hand
			// it over (no free), report mode would not, and the two
			// datastores would part.
			w.step(t, rng, &foreign, false, e, r)
			clk.Advance(time.Duration(10+rng.IntN(300)) * time.Second)
			for k := range freedBy(e, func() { e.r.Pass(ctx, false) }) {
				require.False(t, freed[k], "trial %d: %s freed twice", trial, k.ContainerID)
				freed[k] = true
			}
			r.r.Pass(ctx, false)
		}
		counted := map[datastore.IPAMKey]bool{}
		r.r.mu.Lock()
		for k, c := range r.r.candidates {
			if c.counted {
				counted[k] = true
			}
		}
		total := r.r.totals.WouldReclaim
		r.r.mu.Unlock()
		require.Equal(t, freed, counted, "trial %d: report mode counts what enforce mode frees", trial)
		require.Equal(t, len(counted), total, "trial %d: each once", trial)
	}
}
