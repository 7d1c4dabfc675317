package warmpool

import "math"

// Saturating helpers for non-negative ints. Callers normalise inputs first,
// so only overflow towards +MaxInt has to be guarded.

// nonNeg returns v, or 0 when v is negative.
func nonNeg(v int) int {
	return max(v, 0)
}

// satAdd returns a+b for a, b >= 0, saturating at math.MaxInt.
func satAdd(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// satMul returns a*b for a, b >= 0, saturating at math.MaxInt.
func satMul(a, b int) int {
	if a != 0 && b > math.MaxInt/a {
		return math.MaxInt
	}
	return a * b
}

// ceilDiv returns ceil(n/d) for n >= 0 and d > 0 without computing n+d-1.
func ceilDiv(n, d int) int {
	q := n / d
	if n%d != 0 {
		q++
	}
	return q
}
