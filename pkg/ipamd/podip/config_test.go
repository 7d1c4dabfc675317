package podip

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestReconcilerConfigRefusesUnsafeValues(t *testing.T) {
	tests := []struct{ name, key, val, want string }{
		{"bare number grace", "POD_IP_RECONCILE_GRACE_PERIOD", "5", "needs a unit"},
		{"bare number interval", "POD_IP_RECONCILE_INTERVAL", "60", "needs a unit"},
		{"grace below floor", "POD_IP_RECONCILE_GRACE_PERIOD", "10s", "at least 30s"},
		{"nanosecond interval", "POD_IP_RECONCILE_INTERVAL", "1ns", "at least 5s"},
		{"negative grace", "POD_IP_RECONCILE_GRACE_PERIOD", "-5m", "at least 30s"},
		{"garbage", "POD_IP_RECONCILE_INTERVAL", "soon", "want a duration"},
		{"one-slash endpoint relative", "CRI_RUNTIME_ENDPOINT", "unix:run/containerd.sock", "CRI_RUNTIME_ENDPOINT"},
		{"tcp endpoint", "CRI_RUNTIME_ENDPOINT", "tcp://127.0.0.1:1234", "CRI_RUNTIME_ENDPOINT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(envOf(map[string]string{tc.key: tc.val}))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), tc.key)
		})
	}
	c, err := LoadConfig(envOf(map[string]string{
		"POD_IP_RECONCILE_GRACE_PERIOD": "30s", "POD_IP_RECONCILE_INTERVAL": "5s",
		"CRI_RUNTIME_ENDPOINT": "unix:/run/containerd/containerd.sock",
	}))
	require.NoError(t, err, "the floors themselves and the one-slash unix form are accepted")
	assert.Equal(t, 30*time.Second, c.Grace)
	assert.Equal(t, 5*time.Second, c.Interval)
}
