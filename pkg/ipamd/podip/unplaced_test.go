package podip

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
)

// A checkpoint entry whose address is on no ENI (unplaced) ends when the
// runtime, asked by the entry's sandbox ID on a list trusted as this
// node's, says it has no such sandbox: in enforce mode only, and never on
// a listed sandbox, an unanswered call or a list that may be another
// runtime's.
func TestAnUnplacedEntryEndsWhenTheRuntimeSaysItsSandboxIsGone(t *testing.T) {
	const unplacedID = "00000000000000000000000000000000000000000000000000000000000000aa"
	tests := []struct {
		name  string
		mode  Mode
		setUp func(rt *fakecri.Runtime)
		// liveListed: the running pod holding an allocation is listed (the
		// list is corroborated).
		liveListed bool
		ended      bool
	}{
		{name: "enforce, its sandbox not found: ended", mode: Enforce, liveListed: true, ended: true},
		{name: "report changes nothing", mode: Report, liveListed: true},
		{name: "its sandbox listed: kept", mode: Enforce, liveListed: true, setUp: func(rt *fakecri.Runtime) {
			rt.Add(fakecri.Sandbox{ID: unplacedID, Name: "away", Namespace: "default", State: runtimeapi.PodSandboxState_SANDBOX_READY})
		}},
		{name: "its status call fails: kept", mode: Enforce, liveListed: true, setUp: func(rt *fakecri.Runtime) {
			rt.FailStatusOf(unplacedID, codes.Unavailable)
		}},
		{name: "a list not corroborated as this node's: kept", mode: Enforce},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt, client := testsupport.StartFakeCRI(t)
			clk := clocktest.New()
			path := filepath.Join(t.TempDir(), "ipam.json")
			cp, err := datastore.NewFileCheckpointer(path)
			require.NoError(t, err)
			away := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: unplacedID, IfName: "eth0"}
			require.NoError(t, cp.Write([]datastore.CheckpointEntry{{Key: away, IP: netip.MustParseAddr("10.99.0.1"), AssignedAt: clk.Now().Add(-time.Hour)}}))
			store := datastore.New(datastore.Config{Now: clk.Now, Checkpointer: cp})
			t.Cleanup(func() { _ = store.Close() })
			require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 4}.Populate(store))
			_, err = store.Restore()
			require.NoError(t, err)
			require.Equal(t, 1, store.Unplaced())

			live, err := store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "live", IfName: "eth0"}, datastore.IPAMMetadata{})
			require.NoError(t, err)
			if tc.liveListed {
				rt.Add(fakecri.Sandbox{ID: "live", Name: "live", Namespace: "default", State: runtimeapi.PodSandboxState_SANDBOX_READY, IP: live.IP.String()})
			} else {
				rt.Add(fakecri.Sandbox{ID: "other", Name: "other", Namespace: "default", State: runtimeapi.PodSandboxState_SANDBOX_READY})
			}
			if tc.setUp != nil {
				tc.setUp(rt)
			}
			r := New(Config{Mode: tc.mode}, CRISource(client), store, &recordingEvents{}, nil, nil)
			r.now = clk.Now
			rep := r.Pass(context.Background(), false)

			if tc.ended {
				assert.Equal(t, 1, rep.UnplacedEnded)
				assert.Zero(t, store.Unplaced())
			} else {
				assert.Zero(t, rep.UnplacedEnded)
				assert.Equal(t, 1, store.Unplaced())
			}
			entries, err := cp.Read()
			require.NoError(t, err)
			inFile := false
			for _, e := range entries {
				inFile = inFile || e.Key == away
			}
			assert.Equal(t, !tc.ended, inFile, "in the checkpoint")
		})
	}
}
