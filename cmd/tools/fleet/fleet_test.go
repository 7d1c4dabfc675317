package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSmallFleet runs the three phases with three real agents against one
// throttled account and checks what the report says, not how fast.
func TestSmallFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three agents; not in -short")
	}
	o, err := parseFlags([]string{"-nodes", "3", "-join-rate", "10", "-pods", "12", "-pod-retry", "200ms",
		"-steady", "3s", "-hour", "2s", "-warm-spread", "2s", "-down", "2s", "-attach", "300ms", "-start-limit", "60s",
		"-log", t.TempDir() + "/ipamd.log"}, &strings.Builder{})
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, runAll(o, &out))
	got := out.String()
	t.Log(got)
	for _, want := range []string{
		"## 3 nodes",
		"| nodes started / failed to start | 3 / 0 |",
		"| pods running / planned | 36 / 36 |",
		"### warm-up",
		"### steady state",
		"### scale-down",
		"| AttachNetworkInterface | 3 |", // 12 pods need a second ENI on each node at start
	} {
		assert.Contains(t, got, want)
	}
	assert.NotContains(t, got, "last error of pods still not running")
}
