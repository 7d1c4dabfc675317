package datastore

// freeIndex finds a CIDR with a ready address in O(1). CIDRs are bucketed by
// how many of their addresses are busy (assigned or cooling); assignment picks
// from the fullest bucket so that allocations pack into few prefixes and whole
// prefixes stay free for the pool manager to release.
type freeIndex struct {
	buckets [addressesPerPrefix][]*cidr
	// top is an upper bound on the highest non-empty bucket.
	top int
}

// update puts c in the bucket that matches its current use, or takes it out
// of the index when it has no ready address (or is excluded).
func (f *freeIndex) update(c *cidr, eligible bool) {
	f.remove(c)
	if !eligible || c.ready() <= 0 {
		return
	}
	b := c.used
	c.bucket = b
	c.slot = len(f.buckets[b])
	f.buckets[b] = append(f.buckets[b], c)
	if b > f.top {
		f.top = b
	}
}

func (f *freeIndex) remove(c *cidr) {
	if c.slot < 0 {
		return
	}
	b := &f.buckets[c.bucket]
	last := len(*b) - 1
	moved := (*b)[last]
	(*b)[c.slot] = moved
	moved.slot = c.slot
	(*b)[last] = nil
	*b = (*b)[:last]
	c.slot = -1
}

// pick returns a CIDR with a ready address, preferring the busiest one.
func (f *freeIndex) pick() *cidr {
	for b := f.top; b >= 0; b-- {
		if n := len(f.buckets[b]); n > 0 {
			f.top = b
			return f.buckets[b][n-1]
		}
	}
	f.top = 0
	return nil
}
