package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
)

func TestFresh(t *testing.T) {
	primary := datastore.ENISummary{Info: datastore.ENIInfo{ID: "eni-1"}}
	withIP := datastore.ENISummary{Info: datastore.ENIInfo{ID: "eni-1"}, SecondaryIPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}}
	second := datastore.ENISummary{Info: datastore.ENIInfo{ID: "eni-2"}}
	for _, c := range []struct {
		name string
		n    Node
		enis []datastore.ENISummary
		want bool
	}{
		{"primary ENI alone, no address", Node{}, []datastore.ENISummary{primary}, true},
		{"no ENI", Node{}, nil, true},
		{"an address on it", Node{}, []datastore.ENISummary{withIP}, false},
		{"a second ENI", Node{}, []datastore.ENISummary{primary, second}, false},
		{"an ENI with an address attached at this start (a card above 0)", Node{AttachedNow: []string{"eni-1"}}, []datastore.ENISummary{withIP}, true},
		{"an ENI attached at this start beside one with an address", Node{AttachedNow: []string{"eni-2"}}, []datastore.ENISummary{withIP, second}, false},
		{"an ENI left out", Node{LeftOut: []string{"eni-2"}}, []datastore.ENISummary{primary}, false},
		{"a development pool", Node{Synthetic: true}, []datastore.ENISummary{primary}, false},
		{"IPv6, /80 assigned at this start", Node{IPv6: true, NewIPv6Prefix: true}, []datastore.ENISummary{primary}, true},
		{"IPv6, /80 it already had", Node{IPv6: true}, []datastore.ENISummary{primary}, false},
		{"IPv6, a second ENI", Node{IPv6: true, NewIPv6Prefix: true}, []datastore.ENISummary{primary, second}, false},
	} {
		assert.Equal(t, c.want, Fresh(c.n, c.enis), c.name)
	}
}

// store is a datastore's restore as a start sees it: what Restore answers
// and the node's ENIs.
type store struct {
	rep       datastore.RestoreReport
	err       error
	enis      []datastore.ENISummary
	verifying bool
}

func (s *store) Restore() (datastore.RestoreReport, error) { return s.rep, s.err }
func (s *store) ENISummaries() []datastore.ENISummary      { return s.enis }
func (s *store) VerifyingNewAddresses() bool               { return s.verifying }

// A node that carries addresses, with no runtime to check them against.
func TestRunWithoutRuntime(t *testing.T) {
	used := []datastore.ENISummary{{Info: datastore.ENIInfo{ID: "eni-1"}, SecondaryIPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}}}
	corrupt := fmt.Errorf("%w: bad json", datastore.ErrCheckpointCorrupt)
	for _, c := range []struct {
		name       string
		mode       podip.Mode
		err        error
		wantErr    bool
		wantMarker bool
	}{
		{"read error refuses", podip.Enforce, errors.New("permission denied"), true, false},
		{"corrupt, reconciler wanted: refuses and marks the rebuild", podip.Enforce, corrupt, true, true},
		{"corrupt, reconciler off: starts as upstream", podip.Off, corrupt, false, false},
		{"missing: starts empty", podip.Enforce, nil, false, false},
	} {
		path := filepath.Join(t.TempDir(), "ipam.json")
		err := Run(context.Background(), Config{Checkpoint: path, Mode: c.mode, Log: slog.New(slog.DiscardHandler)},
			&store{err: c.err, enis: used})
		assert.Equal(t, c.wantErr, err != nil, "%s: %v", c.name, err)
		_, statErr := os.Stat(podip.RebuildMarker(path))
		assert.Equal(t, c.wantMarker, statErr == nil, c.name)
	}
}

// The rebuild marker may go once every ENI left out at start has joined.
func TestLeftOutJoined(t *testing.T) {
	s := &store{enis: []datastore.ENISummary{{Info: datastore.ENIInfo{ID: "eni-1"}}}}
	assert.True(t, leftOutJoined(nil, s)())
	joined := leftOutJoined([]string{"eni-2"}, s)
	assert.False(t, joined())
	s.enis = append(s.enis, datastore.ENISummary{Info: datastore.ENIInfo{ID: "eni-2"}})
	require.True(t, joined(), "asked again when the marker might go")
}
