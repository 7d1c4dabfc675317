package cards

import (
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// BenchmarkAssignRelease is one pod's ADD and DEL, in-memory stores of
// 50 addresses a card, no checkpoint and no cooldown: through the bare
// card-0 store (today's path without the set), the set of card 0 alone
// (ENABLE_MULTI_NIC off), a regular pod on a 2-card set, and a multi-NIC
// pod on 2 and 4 cards. Compare the ratios within one run.
func BenchmarkAssignRelease(b *testing.B) {
	key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "c", IfName: "eth0"}
	meta := datastore.IPAMMetadata{K8SPodNamespace: "default", K8SPodName: "p"}
	set := func(b *testing.B, n int) *Set {
		cs := make([]Card, n)
		for i := range n {
			cs[i] = Card{Index: i, Store: cardStore(b, i, 50, nil)}
		}
		s, err := New(cs...)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("store", func(b *testing.B) {
		st := cardStore(b, 0, 50, nil)
		for b.Loop() {
			if _, err := st.Assign(key, meta); err != nil {
				b.Fatal(err)
			}
			if _, err := st.Release(key); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name  string
		cards int
		multi bool
	}{{"set-1card", 1, false}, {"set-2cards-regular", 2, false}, {"set-2cards-multiNIC", 2, true}, {"set-4cards-multiNIC", 4, true}} {
		b.Run(c.name, func(b *testing.B) {
			s := set(b, c.cards)
			for b.Loop() {
				var err error
				if c.multi {
					_, err = s.AssignEach(key, meta)
				} else {
					_, err = s.Assign(key, meta)
				}
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Release(key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
