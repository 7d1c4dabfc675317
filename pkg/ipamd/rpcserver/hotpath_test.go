package rpcserver

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/cards"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// hotPathOptions serve from an in-memory store of four addresses (no
// cooldown) and log JSON at level.
func hotPathOptions(t *testing.T, level slog.Level, out *bytes.Buffer) (Options, *datastore.DataStore) {
	t.Helper()
	store := datastore.New(datastore.Config{})
	t.Cleanup(func() { _ = store.Close() })
	require.NoError(t, store.AddENI(datastore.ENIInfo{ID: "eni-1", Primary: true}))
	ip := netip.MustParseAddr("10.0.0.10")
	for range 4 {
		require.NoError(t, store.AddCIDR("eni-1", netip.PrefixFrom(ip, 32)))
		ip = ip.Next()
	}
	return testOptions(store, slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level}))), store
}

// hotPathHandler is a handler serving from hotPathOptions.
func hotPathHandler(t *testing.T, level slog.Level, out *bytes.Buffer) (*cniHandler, *datastore.DataStore) {
	t.Helper()
	o, store := hotPathOptions(t, level, out)
	return newCNIHandler(o, NewMetrics(prometheus.NewRegistry())), store
}

// The success lines of ADD and DEL are debug lines: logged with their
// attributes at debug, and at info costing no allocation at all: an ADD+DEL
// allocates what the stores (one card) do plus its two replies (reply, metadata
// list, metadata, address string each).
func TestADDAndDELSuccessLinesAreDebugAndFreeWhenOff(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	h, _ := hotPathHandler(t, slog.LevelDebug, &out)
	r, err := h.AddNetwork(ctx, addRequest("c1"))
	require.NoError(t, err)
	require.True(t, r.Success)
	_, err = h.DelNetwork(ctx, delRequest("c1"))
	require.NoError(t, err)
	var msgs []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m))
		msgs = append(msgs, m)
	}
	require.Len(t, msgs, 2)
	assert.Equal(t, "AddNetwork assigned", msgs[0]["msg"])
	assert.Equal(t, "DEBUG", msgs[0]["level"])
	assert.Equal(t, "default/p-c1", msgs[0]["pod"])
	assert.Equal(t, r.IPAllocationMetadata[0].IPv4Addr, msgs[0]["ip"])
	assert.Equal(t, "eni-1", msgs[0]["eni"])
	assert.Equal(t, "DelNetwork released", msgs[1]["msg"])
	assert.Equal(t, "PodDeleted", msgs[1]["reason"])
	assert.Equal(t, r.IPAllocationMetadata[0].IPv4Addr, msgs[1]["ip"])

	out.Reset()
	h, store := hotPathHandler(t, slog.LevelInfo, &out)
	add, del := addRequest("c2"), delRequest("c2")
	handler := testing.AllocsPerRun(200, func() {
		if r, err := h.AddNetwork(ctx, add); err != nil || !r.Success {
			t.Fatal("ADD failed", err)
		}
		if _, err := h.DelNetwork(ctx, del); err != nil {
			t.Fatal(err)
		}
	})
	key := datastore.IPAMKey{NetworkName: add.NetworkName, ContainerID: add.ContainerID, IfName: add.IfName}
	meta := datastore.IPAMMetadata{K8SPodNamespace: add.K8S_POD_NAMESPACE, K8SPodName: add.K8S_POD_NAME, InterfacesCount: 1}
	set := cards.Single(store)
	storeOnly := testing.AllocsPerRun(200, func() {
		if _, err := set.Assign(key, meta); err != nil {
			t.Fatal(err)
		}
		if _, err := set.Release(key); err != nil {
			t.Fatal(err)
		}
	})
	assert.Empty(t, out.String(), "nothing logged at info")
	assert.LessOrEqual(t, handler-storeOnly, 8.0, "handler allocations beyond the store's (%v in all, store %v)", handler, storeOnly)
}
