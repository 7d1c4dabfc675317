package churn

import (
	"testing"
	"time"
)

func TestPlanPodDependsOnlyOnSeedAndIndex(t *testing.T) {
	cfg := Config{Seed: 42, MinLifetime: time.Second, MaxLifetime: 3 * time.Second, DropDEL: 0.3}
	const pods = 5000
	ids := map[string]bool{}
	lost := 0
	for n := pods - 1; n >= 0; n-- { // in reverse: order must not matter
		p := PlanPod(cfg, n)
		if p != PlanPod(cfg, n) {
			t.Fatalf("pod %d planned twice differently: %+v, %+v", n, p, PlanPod(cfg, n))
		}
		if p.N != n || p.Name == "" || len(p.ContainerID) != 64 || ids[p.ContainerID] {
			t.Fatalf("pod %d: bad or repeated identity %+v", n, p)
		}
		ids[p.ContainerID] = true
		if p.Lifetime < cfg.MinLifetime || p.Lifetime >= cfg.MaxLifetime {
			t.Errorf("pod %d lives %s, outside [%s, %s)", n, p.Lifetime, cfg.MinLifetime, cfg.MaxLifetime)
		}
		if p.LoseDEL {
			lost++
		}
	}
	if frac := float64(lost) / pods; frac < 0.27 || frac > 0.33 {
		t.Errorf("%d of %d DELs lost (%.3f), want about %.2f", lost, pods, frac, cfg.DropDEL)
	}

	other := cfg
	other.Seed = 43
	same := 0
	for n := range 100 {
		if PlanPod(other, n).ContainerID == PlanPod(cfg, n).ContainerID {
			same++
		}
	}
	if same > 0 {
		t.Errorf("seeds 42 and 43 gave %d identical container IDs", same)
	}
}

func TestPlanPodEdges(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		life time.Duration
		lose bool
	}{
		{"fixed lifetime, no drop", Config{MinLifetime: 2 * time.Second, MaxLifetime: 2 * time.Second}, 2 * time.Second, false},
		{"max below min", Config{MinLifetime: 2 * time.Second, MaxLifetime: time.Second}, 2 * time.Second, false},
		{"every DEL lost", Config{MinLifetime: time.Second, MaxLifetime: time.Second, DropDEL: 1}, time.Second, true},
	} {
		for n := range 50 {
			p := PlanPod(tc.cfg, n)
			if p.Lifetime != tc.life || p.LoseDEL != tc.lose {
				t.Errorf("%s: pod %d lives %s, loses DEL %v; want %s, %v", tc.name, n, p.Lifetime, p.LoseDEL, tc.life, tc.lose)
			}
		}
	}
}

// DropFor loses DELs only of the pods that start inside it.
func TestPlanPodDropFor(t *testing.T) {
	cfg := Config{Seed: 1, Rate: 2, MinLifetime: time.Second, MaxLifetime: time.Second, DropDEL: 1, DropFor: 10 * time.Second}
	for n := range 40 {
		want := n < 20 // pod n starts at n/2 s
		if got := PlanPod(cfg, n).LoseDEL; got != want {
			t.Errorf("pod %d (starts at %s): LoseDEL %v, want %v", n, StartOffset(cfg, n), got, want)
		}
	}
}
