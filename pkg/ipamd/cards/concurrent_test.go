package cards

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// Concurrent multi-NIC and single-IP ADDs and DELs of different pods
// never hand one address to two pods, and every pod ends with one address
// per card (multi-NIC) or one in all (single-IP).
func TestConcurrentPodsNeverShareAnAddress(t *testing.T) {
	const pods = 40
	s, _ := newSet(t, 4, pods+pods/2, pods, pods, pods)
	var wg sync.WaitGroup
	errs := make(chan error, 2*pods)
	for i := range pods {
		wg.Go(func() {
			if _, err := s.AssignEach(podKey(fmt.Sprintf("multi-%d", i)), podMeta("m")); err != nil {
				errs <- err
			}
		})
		if i%2 == 0 {
			wg.Go(func() {
				if _, err := s.Assign(podKey(fmt.Sprintf("single-%d", i)), podMeta("s")); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, []int{pods + pods/2, pods, pods, pods}, held(s))
	for _, c := range s.Cards() {
		seen := map[netip.Addr]datastore.IPAMKey{}
		for _, a := range c.Store.Allocations() {
			prev, dup := seen[a.IP]
			require.False(t, dup, "card %d: %s held by %s and %s", c.Index, a.IP, prev, a.Key)
			seen[a.IP] = a.Key
		}
	}

	for i := range pods {
		wg.Go(func() {
			released, err := s.Release(podKey(fmt.Sprintf("multi-%d", i)))
			assert.NoError(t, err)
			assert.Len(t, released, 4)
		})
	}
	wg.Wait()
	assert.Equal(t, []int{pods / 2, 0, 0, 0}, held(s))
}
