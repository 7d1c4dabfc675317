package cards

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore/upstreamschema"
)

// fileSet is a set of n cards whose stores checkpoint to their files
// under base (datastore.CheckpointPathForCard), each card's ENI holding
// two free addresses.
func fileSet(t *testing.T, base string, n int) *Set {
	t.Helper()
	cs := make([]Card, n)
	for card := range n {
		cp, err := datastore.NewFileCheckpointer(datastore.CheckpointPathForCard(base, card))
		require.NoError(t, err)
		cs[card] = Card{Index: card, Store: cardStore(t, card, 2, cp)}
	}
	s, err := New(cs...)
	require.NoError(t, err)
	return s
}

// readUpstream decodes a checkpoint file as upstream's reader would, and
// refuses any field upstream does not know.
func readUpstream(t *testing.T, path string) upstreamschema.Doc {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc upstreamschema.Doc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&doc), "%s: %s", path, data)
	require.Equal(t, upstreamschema.Version, doc.Version)
	return doc
}

// writeUpstream writes doc as upstream's ipamd does (encoding/json's
// Encoder, trailing newline).
func writeUpstream(t *testing.T, path string, entries ...upstreamschema.Entry) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.NewEncoder(&buf).Encode(upstreamschema.Doc{Version: upstreamschema.Version, Allocations: entries}))
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
}

// Each card's store writes its own file, named and shaped as upstream's:
// ipam.json for card 0, ipam-nic-1.json for card 1, one entry per card for
// a multi-NIC pod, each with the pod's interface count.
func TestEachCardWritesItsOwnCheckpointInUpstreamsShape(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "ipam.json")
	s := fileSet(t, base, 2)
	multi, err := s.AssignEach(podKey("multi"), podMeta("m"))
	require.NoError(t, err)
	single, err := s.Assign(podKey("single"), datastore.IPAMMetadata{K8SPodNamespace: "default", K8SPodName: "s", InterfacesCount: 1})
	require.NoError(t, err)

	card0 := readUpstream(t, filepath.Join(dir, "ipam.json"))
	card1 := readUpstream(t, filepath.Join(dir, "ipam-nic-1.json"))
	entry := func(a datastore.Allocation, count int) upstreamschema.Entry {
		return upstreamschema.Entry{NetworkName: a.Key.NetworkName, ContainerID: a.Key.ContainerID, IfName: a.Key.IfName,
			IPv4: a.IP.String(), AllocationTimestamp: a.AssignedAt.UnixNano(),
			Metadata: upstreamschema.Metadata{K8SPodNamespace: "default", K8SPodName: a.Metadata.K8SPodName, InterfacesCount: count}}
	}
	assert.ElementsMatch(t, []upstreamschema.Entry{entry(multi[0], 2), entry(single, 1)}, card0.Allocations)
	assert.Equal(t, []upstreamschema.Entry{entry(multi[1], 2)}, card1.Allocations)
	_, err = os.Stat(filepath.Join(dir, "ipam-nic-0.json"))
	assert.ErrorIs(t, err, os.ErrNotExist, "card 0 has no -nic- file")

	// The release shows in both files.
	_, err = s.Release(podKey("multi"))
	require.NoError(t, err)
	assert.Len(t, readUpstream(t, filepath.Join(dir, "ipam.json")).Allocations, 1)
	assert.Empty(t, readUpstream(t, filepath.Join(dir, "ipam-nic-1.json")).Allocations)
}

// Files an upstream ipamd left behind restore into the per-card stores: a
// multi-NIC pod's entry on each card goes back to that card's store, and
// a DEL of the pod after the switch frees both.
func TestUpstreamsPerCardCheckpointsRestoreIntoPerCardStores(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "ipam.json")
	at := time.Date(2026, 11, 30, 8, 0, 0, 123, time.UTC)
	multiMeta := upstreamschema.Metadata{K8SPodNamespace: "ml", K8SPodName: "trainer-0", InterfacesCount: 2}
	multiEntry := func(card int) upstreamschema.Entry {
		return upstreamschema.Entry{NetworkName: "aws-cni", ContainerID: "multi", IfName: "eth0",
			IPv4: cardAddr(card, 1).String(), AllocationTimestamp: at.UnixNano(), Metadata: multiMeta}
	}
	writeUpstream(t, base, multiEntry(0), upstreamschema.Entry{NetworkName: "aws-cni", ContainerID: "single", IfName: "eth0",
		IPv4: cardAddr(0, 0).String(), AllocationTimestamp: at.UnixNano(),
		Metadata: upstreamschema.Metadata{K8SPodNamespace: "default", K8SPodName: "web", InterfacesCount: 1}})
	writeUpstream(t, datastore.CheckpointPathForCard(base, 1), multiEntry(1))

	s := fileSet(t, base, 2)
	for _, c := range s.Cards() {
		rep, err := c.Store.Restore()
		require.NoError(t, err, "card %d", c.Index)
		assert.Empty(t, rep.NotInPool, "card %d", c.Index)
		assert.Empty(t, rep.Conflicts, "card %d", c.Index)
	}
	assert.Equal(t, []int{2, 1}, held(s))
	for card := range 2 {
		a, ok := s.FindOnCard(card, podKey("multi"))
		require.True(t, ok, "card %d", card)
		assert.Equal(t, cardAddr(card, 1), a.IP)
		assert.Equal(t, 2, a.Metadata.InterfacesCount)
		assert.True(t, a.AssignedAt.Equal(at))
	}
	again, err := s.AssignEach(podKey("multi"), podMeta("trainer-0"))
	require.NoError(t, err, "a retried ADD after the switch")
	assert.Equal(t, cardAddr(0, 1), again[0].IP)
	assert.Equal(t, cardAddr(1, 1), again[1].IP)

	released, err := s.Release(podKey("multi"))
	require.NoError(t, err)
	require.Len(t, released, 2)
	assert.Equal(t, []int{1, 0}, held(s))
	assert.Empty(t, readUpstream(t, datastore.CheckpointPathForCard(base, 1)).Allocations)
}
