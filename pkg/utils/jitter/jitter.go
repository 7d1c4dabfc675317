// Package jitter spreads periodic work in time, so that a fleet of nodes
// started together does not call EC2 (or IMDS) in step. It owns only the
// arithmetic; callers keep their own timers.
package jitter

import (
	"math/rand/v2"
	"time"
)

// Spread returns d scaled by a random factor in [1-frac, 1+frac): a period
// that drifts, so two nodes that once ran together do not stay together.
// frac is clamped to [0, 1].
func Spread(d time.Duration, frac float64) time.Duration {
	return spread(d, frac, rand.Float64())
}

// Offset returns a random duration in [0, d): where in its first period a
// job starts.
func Offset(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d)))
}

// spread is Spread with the random draw u in [0, 1) given.
func spread(d time.Duration, frac, u float64) time.Duration {
	frac = min(max(frac, 0), 1)
	return time.Duration(float64(d) * (1 - frac + 2*frac*u))
}
