package trigger

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// The tests run on real time. They never assert how soon something
// happens, only order, that a delivery comes (within a generous bound),
// and that one does not come early: a timing only ever makes them pass
// for the wrong reason, never fail.

// eventually is the bound for a delivery that must come.
const eventually = 10 * time.Second

// ready reports whether a fire waits on C, without blocking.
func ready(tr *Trigger) bool {
	select {
	case <-tr.C():
		return true
	default:
		return false
	}
}

// quiet fails if C delivers within d.
func quiet(t *testing.T, tr *Trigger, d time.Duration, why string) {
	t.Helper()
	select {
	case <-tr.C():
		t.Fatal(why)
	case <-time.After(d):
	}
}

// receive fails unless C delivers within eventually.
func receive(t *testing.T, tr *Trigger) {
	t.Helper()
	select {
	case <-tr.C():
	case <-time.After(eventually):
		t.Fatal("a fire was never delivered")
	}
}

func TestReasonsFold(t *testing.T) {
	tests := []struct {
		name  string
		fires []string
		want  []string
	}{
		{"nothing fired", nil, nil},
		{"one reason", []string{"a"}, []string{"a"}},
		{"no reason", []string{""}, nil},
		{"empty reasons are not reasons", []string{"", "a", ""}, []string{"a"}},
		{"repeats fold, first-fired order", []string{"b", "a", "b", "c", "a"}, []string{"b", "a", "c"}},
	}
	for _, tt := range tests {
		for _, minInterval := range []time.Duration{0, time.Hour} {
			t.Run(fmt.Sprintf("%s, min interval %v", tt.name, minInterval), func(t *testing.T) {
				tr := NewWithOptions(Options{MinInterval: minInterval})
				defer tr.Stop()
				for _, r := range tt.fires {
					tr.Fire(r)
				}
				if got := tr.Pending(); got != (len(tt.fires) > 0) {
					t.Fatalf("Pending = %t after %d fires", got, len(tt.fires))
				}
				// Never taken before, so even an hour's interval delivers at once.
				if got := ready(tr); got != (len(tt.fires) > 0) {
					t.Fatalf("delivered = %t after %d fires", got, len(tt.fires))
				}
				if got := tr.Take(); !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
					t.Fatalf("Take = %#v, want %#v", got, tt.want)
				}
				if tr.Pending() || ready(tr) {
					t.Fatal("a fire is left after Take")
				}
				if got := tr.Take(); got != nil {
					t.Fatalf("second Take = %#v, want nil", got)
				}
			})
		}
	}
}

func TestFiresFoldAndAreNotLost(t *testing.T) {
	tr := New()
	if tr.Pending() {
		t.Fatal("new trigger has a pending fire")
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				tr.Fire(fmt.Sprint(g, i%3)) // never blocks
			}
		}()
	}
	wg.Wait()
	if !tr.Pending() {
		t.Fatal("fires were lost")
	}
	<-tr.C()
	if got := tr.Take(); len(got) != 8*3 {
		t.Fatalf("Take = %d reasons, want 24 distinct: %v", len(got), got)
	}
	quiet(t, tr, 10*time.Millisecond, "800 fires did not fold into one delivery")
}

// Take consumes a delivered fire even when the loop was woken by its own
// timer, so C does not wake it a second time for the same fire.
func TestTakeConsumesADeliveredFire(t *testing.T) {
	tr := New()
	tr.Fire("a")
	if got := tr.Take(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("Take = %v", got)
	}
	if ready(tr) {
		t.Fatal("a taken fire was still delivered")
	}
}

func TestNoMinIntervalDeliversAtOnce(t *testing.T) {
	tr := New()
	for range 3 {
		tr.Take()
		tr.Fire("")
		if !ready(tr) { // delivered inside Fire: no timing involved
			t.Fatal("a fire right after Take waited, with no minimum interval")
		}
	}
}

// A fire within MinInterval of the last Take is held, then delivered when
// the interval ends with every reason fired meanwhile.
func TestMinIntervalPostponesAndNeverDrops(t *testing.T) {
	const minInterval = 150 * time.Millisecond
	tr := NewWithOptions(Options{MinInterval: minInterval})
	defer tr.Stop()
	for round := range 3 {
		beforeTake := time.Now()
		tr.Take()
		tr.Fire("a")
		tr.Fire("b") // during the pending delayed delivery: folds into it
		tr.Fire("a")
		if !tr.Pending() {
			t.Fatalf("round %d: a held fire is not pending", round)
		}
		if ready(tr) && time.Since(beforeTake) < minInterval {
			t.Fatalf("round %d: delivered within the minimum interval", round)
		}
		receive(t, tr)
		if waited := time.Since(beforeTake); waited < minInterval {
			t.Fatalf("round %d: delivered %v after Take, before the %v interval ended", round, waited, minInterval)
		}
		if got := tr.Take(); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("round %d: Take = %v, want [a b]", round, got)
		}
	}
	quiet(t, tr, 2*minInterval, "one folded fire was delivered twice")
}

// The loop may run on its own timer while a delivery is held: Take then
// takes the fire and cancels the delivery.
func TestTakeCancelsAHeldDelivery(t *testing.T) {
	const minInterval = 100 * time.Millisecond
	tr := NewWithOptions(Options{MinInterval: minInterval})
	tr.Take()
	tr.Fire("a")
	if got := tr.Take(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("Take = %v", got)
	}
	if tr.Pending() {
		t.Fatal("still pending after Take")
	}
	quiet(t, tr, 3*minInterval, "a taken fire was delivered when its interval ended")

	// The next fire is held for the interval the second Take started.
	tr.Fire("b")
	receive(t, tr)
	if got := tr.Take(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("Take = %v", got)
	}
}

func TestStopCancelsAHeldDelivery(t *testing.T) {
	const minInterval = 100 * time.Millisecond
	tr := NewWithOptions(Options{MinInterval: minInterval})
	tr.Take()
	tr.Fire("a")
	tr.Stop()
	tr.Stop() // idempotent
	quiet(t, tr, 3*minInterval, "a stopped delivery was made")
	if !tr.Pending() {
		t.Fatal("Stop dropped the pending fire")
	}
	// A later fire behaves as usual; the stopped one's reason is kept.
	tr.Fire("b")
	receive(t, tr)
	if got := tr.Take(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Take = %v, want [a b]", got)
	}
}

// A loop and many firers: every reason reaches some Take, and the loop is
// never woken by C within MinInterval of its previous run.
func TestConcurrentFiresReachTheLoop(t *testing.T) {
	const (
		minInterval = 5 * time.Millisecond
		firers      = 4
		perFirer    = 200
	)
	tr := NewWithOptions(Options{MinInterval: minInterval})
	defer tr.Stop()
	seen := map[string]bool{}
	done := make(chan struct{})
	var early []time.Duration
	go func() {
		defer close(done)
		var lastRun time.Time
		deadline := time.After(eventually)
		for len(seen) < firers*perFirer {
			select {
			case <-tr.C():
			case <-deadline:
				return
			}
			now := time.Now()
			if !lastRun.IsZero() && now.Sub(lastRun) < minInterval {
				early = append(early, now.Sub(lastRun))
			}
			lastRun = now // taken just before Take, which starts the interval
			for _, r := range tr.Take() {
				seen[r] = true
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range firers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perFirer {
				tr.Fire(fmt.Sprint(g, "/", i))
				if i%50 == 0 {
					time.Sleep(minInterval / 2)
				}
			}
		}()
	}
	wg.Wait()
	<-done
	if len(seen) != firers*perFirer {
		t.Fatalf("the loop took %d of %d reasons", len(seen), firers*perFirer)
	}
	if len(early) > 0 {
		t.Fatalf("woken within the minimum interval of the previous run: %v", early)
	}
}
