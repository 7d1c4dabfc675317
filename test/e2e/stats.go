package e2e

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"time"
)

// Latencies collects durations (safe for concurrent use).
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one duration.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Len is the number of samples.
func (l *Latencies) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

func percentile(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Summary renders n, p50, p90, p99 and max.
func (l *Latencies) Summary() string {
	l.mu.Lock()
	s := append([]time.Duration(nil), l.d...)
	l.mu.Unlock()
	if len(s) == 0 {
		return "n=0"
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("n=%d p50=%v p90=%v p99=%v max=%v", len(s), r(percentile(s, 50)), r(percentile(s, 90)),
		r(percentile(s, 99)), r(percentile(s, 100)))
}

// Merge adds all samples of o.
func (l *Latencies) Merge(o *Latencies) {
	o.mu.Lock()
	s := append([]time.Duration(nil), o.d...)
	o.mu.Unlock()
	l.mu.Lock()
	l.d = append(l.d, s...)
	l.mu.Unlock()
}

// From returns the samples recorded after the first i.
func (l *Latencies) From(i int) *Latencies {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := &Latencies{}
	if i < len(l.d) {
		out.d = append(out.d, l.d[i:]...)
	}
	return out
}
