package ipamd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
)

// The cards above 0 learn from card 0's store what it records of a
// sandbox: whether an allocation holds it (whatever the key's network and
// interface names), and the interfaces that allocation names.
func TestCardReconcilersReadCardZerosRecordOfASandbox(t *testing.T) {
	store := datastore.New(datastore.Config{})
	t.Cleanup(func() { _ = store.Close() })
	require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 3}.Populate(store))
	_, err := store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "multi", IfName: "eth0"}, datastore.IPAMMetadata{InterfacesCount: 2})
	require.NoError(t, err)
	_, err = store.Assign(datastore.IPAMKey{NetworkName: "other-net", ContainerID: "single", IfName: "net1"}, datastore.IPAMMetadata{InterfacesCount: 1})
	require.NoError(t, err)
	records := recordedInterfaces(store)
	for _, tc := range []struct {
		id    string
		held  bool
		count int
	}{
		{id: "multi", held: true, count: 2},
		{id: "single", held: true, count: 1},
		{id: "absent", held: false, count: 0},
	} {
		held, count := records(tc.id)
		assert.Equal(t, tc.held, held, tc.id)
		assert.Equal(t, tc.count, count, tc.id)
	}
}
