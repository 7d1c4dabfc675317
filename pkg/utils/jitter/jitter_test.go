package jitter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSpread(t *testing.T) {
	tests := []struct {
		d    time.Duration
		frac float64
		u    float64
		want time.Duration
	}{
		{time.Hour, 0.1, 0, 54 * time.Minute},
		{time.Hour, 0.1, 0.5, time.Hour},
		{time.Hour, 0.1, 0.75, 63 * time.Minute},
		{time.Hour, 0, 0.9, time.Hour},
		{time.Minute, -1, 0.3, time.Minute}, // clamped to 0
		{time.Minute, 2, 0, 0},              // clamped to 1
		{time.Minute, 2, 0.5, time.Minute},
		{0, 0.5, 0.7, 0},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, spread(tc.d, tc.frac, tc.u), "%v %v %v", tc.d, tc.frac, tc.u)
	}
}

func TestSpreadAndOffsetStayInRange(t *testing.T) {
	for range 1000 {
		s := Spread(time.Hour, 0.1)
		assert.GreaterOrEqual(t, s, 54*time.Minute)
		assert.Less(t, s, 66*time.Minute)
		o := Offset(time.Minute)
		assert.GreaterOrEqual(t, o, time.Duration(0))
		assert.Less(t, o, time.Minute)
	}
	assert.Zero(t, Offset(0))
	assert.Zero(t, Offset(-time.Second))
}
