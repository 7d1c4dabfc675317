package ec2sim

import "time"

// Bucket is the shape of one EC2 request token bucket: it holds at most
// Capacity tokens (the burst) and regains RefillPerSecond tokens every
// second, continuously, until full. Each request takes one token.
type Bucket struct {
	Capacity        int
	RefillPerSecond float64 // may be fractional (EC2 has 0.1/s buckets); 0 never refills
}

// tokenEpsilon absorbs float rounding, so that refilling 0.1 tokens ten
// times makes a whole token.
const tokenEpsilon = 1e-9

// tokenBucket is one bucket's state. It is pure arithmetic over the time
// the caller passes in; the caller owns locking.
type tokenBucket struct {
	shape  Bucket
	tokens float64
	last   time.Time // when tokens was last brought up to date
}

// newTokenBucket is a full bucket at now, as EC2's buckets start.
func newTokenBucket(b Bucket, now time.Time) tokenBucket {
	return tokenBucket{shape: b, tokens: float64(b.Capacity), last: now}
}

// take refills the bucket up to now and spends one token if there is
// one. A clock that goes backwards refills nothing.
func (t *tokenBucket) take(now time.Time) bool {
	if now.After(t.last) {
		t.tokens = min(float64(t.shape.Capacity), t.tokens+now.Sub(t.last).Seconds()*t.shape.RefillPerSecond)
		t.last = now
	}
	if t.tokens < 1-tokenEpsilon {
		return false
	}
	t.tokens = max(t.tokens-1, 0)
	return true
}
