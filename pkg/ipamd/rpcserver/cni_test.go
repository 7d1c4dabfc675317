package rpcserver

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/cards"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// testOptions are the least the handlers serve from: store, version "v",
// an errors counter and log.
func testOptions(store *datastore.DataStore, log *slog.Logger) Options {
	return Options{
		Deps:          Deps{Store: cards.Single(store), Stats: cards.Single(store)},
		Settings:      Settings{Version: "v"},
		Observability: Observability{Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "errors"}, []string{"fn"}), Log: log},
	}
}

func newTestHandler(t *testing.T, store *datastore.DataStore) (*cniHandler, *Metrics) {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	return newCNIHandler(testOptions(store, slog.New(slog.DiscardHandler)), m), m
}

func addRequest(id string) *rpc.AddNetworkRequest {
	return &rpc.AddNetworkRequest{ClientVersion: "v", ContainerID: id, IfName: "eth0", NetworkName: "aws-cni",
		K8S_POD_NAME: "p-" + id, K8S_POD_NAMESPACE: "default", Netns: "/var/run/netns/" + id}
}

// An ADD that finds no address wakes the pool manager and, when the
// reconciler frees a confirmed leak for it, is retried and served.
func TestExhaustedADDWakesThePoolAndRetriesAfterAReclaim(t *testing.T) {
	store := datastore.New(datastore.Config{})
	defer store.Close()
	require.NoError(t, store.AddENI(datastore.ENIInfo{ID: "eni-1", Primary: true}))
	require.NoError(t, store.AddCIDR("eni-1", netip.MustParsePrefix("10.0.0.10/32")))
	h, m := newTestHandler(t, store)
	woken := 0
	h.deps.OnExhausted = func() { woken++ }

	r, err := h.AddNetwork(context.Background(), addRequest("a"))
	require.NoError(t, err)
	require.True(t, r.Success)
	assert.Zero(t, woken)

	r, err = h.AddNetwork(context.Background(), addRequest("b"))
	require.NoError(t, err)
	assert.False(t, r.Success)
	assert.Equal(t, 1, woken)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.noIP))

	h.deps.Reclaim = func(context.Context) bool { // the reconciler frees "a" (a confirmed leak)
		a, _ := store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "a", IfName: "eth0"})
		_, err := store.ReleaseRestedIfUnchanged(a.Key, a.AssignedAt)
		return err == nil
	}
	r, err = h.AddNetwork(context.Background(), addRequest("b"))
	require.NoError(t, err)
	assert.True(t, r.Success, "served after the inline reclaim")
	assert.Equal(t, 2, woken)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.noIP), "a served ADD is not counted as failed")
}
