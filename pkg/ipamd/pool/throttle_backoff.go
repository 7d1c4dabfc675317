package pool

import (
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/jitter"
)

// Pauses after EC2 throttled pool growth. Growth while no address is
// assignable (an ADD is failing or about to) retries soon: a pod waits on
// it. Growth for the warm target alone backs off far longer, so that in a
// fleet short of EC2's request tokens (a cluster start: EC2 creates five
// ENIs a second for the whole account by default) the tokens go to the
// nodes whose pods wait, and warm spares come after.
const (
	urgentFirstPause = time.Second
	urgentMaxPause   = 10 * time.Second
	warmMaxPause     = 2 * time.Minute
)

// growthBackoff spaces attempts EC2 throttles: each throttled attempt in a
// row doubles the pause, spread ±50 % so that a fleet throttled together
// does not retry together. Every step would otherwise ask again, adding to
// the account-wide load that caused the throttling. The first attempt
// that is not throttled resets it.
type growthBackoff struct {
	failures int
	until    time.Time
}

// failed records a throttled attempt at now and returns the pause: first ×
// 2^(failures-1), at most maxPause, spread.
func (b *growthBackoff) failed(first, maxPause time.Duration, now time.Time) time.Duration {
	b.failures++
	b.until = now.Add(jitter.Spread(growthPause(first, maxPause, b.failures), 0.5))
	return b.until.Sub(now)
}

// growthPause is the pause after the n-th throttled attempt in a row,
// before its spread: first × 2^(n-1) (first at least a second), at most
// maxPause.
func growthPause(first, maxPause time.Duration, n int) time.Duration {
	d := max(first, time.Second)
	for i := 1; i < n && d < maxPause; i++ {
		d *= 2
	}
	return min(d, maxPause)
}
