package pool

import (
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/jitter"
)

// maxGrowthPause caps how long growth waits after EC2 throttled it.
const maxGrowthPause = time.Minute

// growthBackoff spaces pool-growth attempts while EC2 throttles them: each
// throttled attempt in a row doubles the pause (from one pool interval, at
// most a minute), spread ±50 % so that a fleet throttled together does not
// retry together. Every step would otherwise ask again, adding to the
// account-wide load that caused the throttling. The first attempt that is
// not throttled resets it.
type growthBackoff struct {
	failures int
	until    time.Time
}

// failed records a throttled attempt at now and returns the pause.
func (b *growthBackoff) failed(interval time.Duration, now time.Time) time.Duration {
	b.failures++
	b.until = now.Add(jitter.Spread(growthPause(interval, b.failures), 0.5))
	return b.until.Sub(now)
}

// growthPause is the pause after the n-th throttled attempt in a row,
// before its spread: interval × 2^(n-1), at most maxGrowthPause.
func growthPause(interval time.Duration, n int) time.Duration {
	d := max(interval, time.Second)
	for i := 1; i < n && d < maxGrowthPause; i++ {
		d *= 2
	}
	return min(d, maxGrowthPause)
}
