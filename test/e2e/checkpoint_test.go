package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore/upstreamschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodeUpstreamStrict decodes as an upstream reader would, but refuses
// anything upstream's schema does not define: unknown fields, keys that
// only match case-insensitively, trailing data.
func decodeUpstreamStrict(t testing.TB, raw []byte) upstreamschema.Doc {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var doc upstreamschema.Doc
	require.NoError(t, dec.Decode(&doc), "upstream schema decode")
	_, err := dec.Token()
	require.ErrorIs(t, err, io.EOF, "nothing after the document")

	var generic struct {
		Top         map[string]json.RawMessage
		Allocations []map[string]json.RawMessage `json:"allocations"`
	}
	require.NoError(t, json.Unmarshal(raw, &generic.Top))
	require.NoError(t, json.Unmarshal(raw, &generic))
	assert.ElementsMatch(t, []string{"version", "allocations"}, keys(generic.Top), "top-level keys")
	allowed := upstreamschema.AllocationKeys
	for i, a := range generic.Allocations {
		for k := range a {
			assert.Containsf(t, allowed, k, "allocation %d: key %q (case-sensitive) is not upstream's", i, k)
		}
		var md map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(a["metadata"], &md))
		for k := range md {
			assert.Containsf(t, upstreamschema.MetadataKeys, k, "allocation %d: metadata key %q", i, k)
		}
	}
	return doc
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestCheckpointUpgradeRollback checks both directions of an image switch
// on a node with running pods: a checkpoint our ipamd wrote decodes with
// upstream's schema (rollback), and a checkpoint in upstream's format,
// written by hand, restores in our ipamd with every pod keeping its
// address (upgrade), including an entry in the "_migrated-from-cri" key
// shape very old upstream versions wrote.
func TestCheckpointUpgradeRollback(t *testing.T) {
	n := NewNode(t, Options{})
	pods := n.ParallelRun(t, "cp", 4, 2)

	// Rollback: upstream reads what we wrote.
	raw, err := os.ReadFile(n.IPAMD.Store)
	require.NoError(t, err)
	doc := decodeUpstreamStrict(t, raw)
	assert.Equal(t, "vpc-cni-ipam/1", doc.Version)
	require.Len(t, doc.Allocations, len(pods))
	byID := map[string]upstreamschema.Entry{}
	for _, a := range doc.Allocations {
		byID[a.ContainerID] = a
	}
	for _, p := range pods {
		a, ok := byID[p.ID]
		require.Truef(t, ok, "no allocation for %s", p.Name)
		assert.Equal(t, "aws-cni", a.NetworkName)
		assert.Equal(t, "eth0", a.IfName)
		assert.Equal(t, p.IP.String(), a.IPv4)
		assert.Empty(t, a.IPv6)
		// As upstream, an ADD records one interface for the pod.
		assert.Equal(t, upstreamschema.Metadata{K8SPodNamespace: podNS, K8SPodName: p.Name, InterfacesCount: 1}, a.Metadata)
		at := time.Unix(0, a.AllocationTimestamp)
		assert.WithinRangef(t, at, p.Created.Add(-time.Second), p.Created.Add(p.CreateTook+time.Second),
			"allocationTimestamp of %s is Unix nanoseconds of the ADD", p.Name)
	}

	// Upgrade: our ipamd restores what upstream wrote. The document is
	// written by hand in the shape upstream's encoding/json produces.
	require.NoError(t, n.IPAMD.Stop())
	base := time.Now().Add(-2 * time.Hour).UnixNano()
	var entries []string
	for i, p := range pods {
		if i == len(pods)-1 {
			entries = append(entries, fmt.Sprintf(`{"networkName":"_migrated-from-cri","containerID":%q,"ifName":"unknown","ipv4":%q,"allocationTimestamp":%d,"metadata":{}}`,
				p.ID, p.IP.String(), base+int64(i)))
			continue
		}
		entries = append(entries, fmt.Sprintf(`{"networkName":"aws-cni","containerID":%q,"ifName":"eth0","ipv4":%q,"allocationTimestamp":%d,"metadata":{"k8sPodNamespace":%q,"k8sPodName":%q}}`,
			p.ID, p.IP.String(), base+int64(i), podNS, p.Name))
	}
	upstream := `{"version":"vpc-cni-ipam/1","allocations":[` + strings.Join(entries, ",") + `]}`
	decodeUpstreamStrict(t, []byte(upstream)) // the fixture itself is upstream-valid
	require.NoError(t, os.WriteFile(n.IPAMD.Store, []byte(upstream), 0o644))
	require.NoError(t, n.IPAMD.Start())

	st := requireConsistent(t, n)
	for _, p := range pods {
		assert.Equal(t, p.IP, st.Checkpoint[p.ID], "%s keeps its address across the upgrade", p.Name)
		assert.NoError(t, n.CheckPodNetwork(p))
	}
	migrated := st.Assigned[pods[len(pods)-1].IP]
	assert.Equal(t, "_migrated-from-cri", migrated.NetworkName, "the migrated key is kept as is")
	fresh := n.MustRunPod(t, n.NextName("after-upgrade"))
	assert.NotContains(t, podIPs(pods), fresh.IP, "a new pod gets an address no restored pod holds")
	assert.NoError(t, n.Ping(fresh, pods[0]))

	// The reconciler sees two-hour-old allocations: their sandboxes are
	// listed, so it must leave them alone.
	_, ok := WaitFor(30*time.Second, func() bool {
		rec, err := n.IPAMD.Reconciler()
		return err == nil && rec.Totals.Passes-rec.Totals.Skipped >= 2
	})
	require.True(t, ok, "the reconciler made two passes")
	rec, err := n.IPAMD.Reconciler()
	require.NoError(t, err)
	assert.Zero(t, rec.Totals.Reclaimed, "nothing reclaimed after the upgrade")
	requireConsistent(t, n)

	// DELs find the restored allocations, the migrated one by its real key.
	n.MustDeletePod(t, pods[0])
	n.MustDeletePod(t, pods[len(pods)-1])
	assert.Empty(t, heldIPs(t, n, []netip.Addr{pods[0].IP, pods[len(pods)-1].IP}), "deleted pods' addresses are free")
	st = requireConsistent(t, n)
	assert.Len(t, st.Checkpoint, len(pods)-1)

	// And what our ipamd wrote after restoring is still upstream-readable.
	raw, err = os.ReadFile(n.IPAMD.Store)
	require.NoError(t, err)
	assert.Len(t, decodeUpstreamStrict(t, raw).Allocations, len(pods)-1)
}
