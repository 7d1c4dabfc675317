package podip

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
)

// When a card's joining addresses wait on a multi-NIC pod the runtime's
// IPs do not cover, the status names the pod and the card (WaitsOn, and
// PendingReason in /v1/reconciler), and one warning per sandbox says so;
// on card 0 nothing of it appears.
func TestACardWaitingOnAnUncoveredMultiNICPodSaysWhichPodOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		card  int
		waits bool
	}{
		{name: "card 1 waits on the pod and says so", card: 1, waits: true},
		{name: "card 0 verifies and names no pod", card: 0, waits: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := datastore.New(datastore.Config{VerifyNewAddresses: true})
			t.Cleanup(func() { _ = store.Close() })
			require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 2}.Populate(store))
			multi := Sandbox{ID: "m", Name: "web", Namespace: "prod", Ready: true, MultiNIC: true}
			src := &listedRuntime{
				sandboxes: []Sandbox{{ID: "agent", Name: coverAgent, Namespace: "kube-system", Ready: true}, multi},
				ips:       map[string][]netip.Addr{"m": {coverEth0}},
			}
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			r := New(Config{Mode: Enforce, PodName: coverAgent, NetworkCard: tc.card}, src, store, nil, log, nil)
			var res VerifyResult
			for range 3 {
				var err error
				res, err = r.VerifyNow(context.Background())
				require.NoError(t, err)
				if !tc.waits {
					break
				}
			}
			if !tc.waits {
				assert.Equal(t, VerifyResult{Verified: 2}, res)
				assert.NotContains(t, logs.String(), "multi-NIC")
				return
			}
			assert.Equal(t, 2, res.Waiting)
			assert.Equal(t, WaitStatuses, res.Reason)
			assert.Contains(t, res.WaitsOn, "multi-NIC pod prod/web (sandbox m)")
			assert.Contains(t, res.WaitsOn, "network card 1")
			assert.Contains(t, r.Status().PendingReason, res.WaitsOn, "/v1/reconciler says what the card waits on")
			assert.Equal(t, 1, strings.Count(logs.String(), "wait on a multi-NIC pod"), "one warning per sandbox: %s", logs.String())
			assert.Contains(t, logs.String(), "networkCard=1")
			assert.Contains(t, logs.String(), "pod=prod/web")
		})
	}
}
