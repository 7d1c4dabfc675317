package trigger

import (
	"sync"
	"testing"
	"time"
)

func TestFiresMergeAndAreNotLost(t *testing.T) {
	tr := New()
	if tr.Pending() {
		t.Fatal("new trigger has a pending fire")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				tr.Fire() // never blocks
			}
		}()
	}
	wg.Wait()
	if !tr.Pending() {
		t.Fatal("fires were lost")
	}
	<-tr.C()
	if tr.Pending() {
		t.Fatal("800 fires did not merge into one")
	}
	select {
	case <-tr.C():
		t.Fatal("a consumed fire came back")
	case <-time.After(10 * time.Millisecond):
	}
}
