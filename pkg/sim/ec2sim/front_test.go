package ec2sim

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestThrottleConfigValidation(t *testing.T) {
	bad := map[string]*ThrottleConfig{
		"zero capacity":        {Categories: map[Category]Bucket{Mutating: {0, 1}}},
		"negative refill":      {Actions: map[string]Bucket{"CreateTags": {1, -1}}},
		"NaN refill":           {Actions: map[string]Bucket{"CreateTags": {1, math.NaN()}}},
		"unknown action":       {Actions: map[string]Bucket{"CreateTag": {1, 1}}},
		"uncategorized as one": {Categories: map[Category]Bucket{Uncategorized: {50, 5}}},
		"no such category":     {Categories: map[Category]Bucket{Category(42): {50, 5}}},
	}
	for name, cfg := range bad {
		_, err := New(Config{Throttle: cfg})
		require.Error(t, err, name)
	}
	s, err := New(Config{Throttle: DefaultThrottle()})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

func TestLatencyConfig(t *testing.T) {
	bad := map[string]Config{
		"negative latency":        {Latency: -time.Second},
		"negative action latency": {ActionLatency: map[string]time.Duration{"CreateTags": -1}},
		"unknown action":          {ActionLatency: map[string]time.Duration{"DescribeInstance": time.Millisecond}},
	}
	for name, cfg := range bad {
		_, err := New(cfg)
		require.Error(t, err, name)
	}

	l := newLatencies(7*time.Millisecond, map[string]time.Duration{"CreateTags": time.Second, "DescribeVpcs": 0})
	require.Equal(t, time.Second, l.of("CreateTags"))
	require.Equal(t, time.Duration(0), l.of("DescribeVpcs"), "an explicit zero is kept")
	require.Equal(t, 7*time.Millisecond, l.of("DescribeSubnets"), "falls back to Latency")
}

// TestDefaultLatencies checks that every implemented action has a figure
// in the range the package doc promises.
func TestDefaultLatencies(t *testing.T) {
	d := DefaultLatencies()
	require.Len(t, d, len(actions))
	for a, lat := range d {
		lo, hi := 50*time.Millisecond, 400*time.Millisecond
		if !actions[a].mutates {
			lo, hi = 10*time.Millisecond, 100*time.Millisecond
		}
		require.True(t, lat >= lo && lat <= hi, "%s: %v not in [%v, %v]", a, lat, lo, hi)
	}
	require.Equal(t, 300*time.Millisecond, d["CreateNetworkInterface"])
	_, err := New(Config{ActionLatency: d})
	require.NoError(t, err)
}
