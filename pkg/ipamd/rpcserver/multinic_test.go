package rpcserver

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfail"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/cards"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// cardTable is the route table of device 0 on card (card 0's primary ENI
// routes through main).
func cardTable(card int) int {
	if card == 0 {
		return 254
	}
	return 10000 + 100*card
}

// cardPrefix holds card's addresses: 10.<card>.0.0/24.
func cardPrefix(card int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(card), 0, 0}), 24)
}

// multiServed is a server over one real datastore per card, each
// checkpointing to its own file under one directory (ipam.json,
// ipam-nic-1.json, ...), and a client on the unix socket.
type multiServed struct {
	set     *cards.Set
	dir     string
	metrics *Metrics
	cni     rpc.CNIBackendClient
	config  rpc.ConfigServerBackendClient
}

// serveCards starts New(o) over len(free) cards, card c's ENI (device 0 on
// that card) holding free[c] addresses; o.Store and o.Stats are the set.
func serveCards(t *testing.T, o Options, free ...int) *multiServed {
	t.Helper()
	dir := t.TempDir()
	cs := make([]cards.Card, len(free))
	for card, n := range free {
		cp, err := datastore.NewFileCheckpointer(datastore.CheckpointPathForCard(filepath.Join(dir, "ipam.json"), card))
		require.NoError(t, err)
		d := datastore.New(datastore.Config{NetworkCard: card, Checkpointer: cp})
		t.Cleanup(func() { _ = d.Close() })
		eni := fmt.Sprintf("eni-card%d", card)
		require.NoError(t, d.AddENI(datastore.ENIInfo{ID: eni, Primary: card == 0, RouteTableID: cardTable(card)}))
		ip := cardPrefix(card).Addr().Next()
		for range n {
			require.NoError(t, d.AddCIDR(eni, netip.PrefixFrom(ip, 32)))
			ip = ip.Next()
		}
		cs[card] = cards.Card{Index: card, Store: d}
	}
	set, err := cards.New(cs...)
	require.NoError(t, err)
	o.Store, o.Stats = set, set
	m, conn := listen(t, o, dir)
	return &multiServed{set: set, dir: dir, metrics: m, cni: rpc.NewCNIBackendClient(conn), config: rpc.NewConfigServerBackendClient(conn)}
}

// assigned is how many addresses each card's store has assigned.
func (s *multiServed) assigned() []int {
	var out []int
	for _, c := range s.set.Cards() {
		out = append(out, c.Store.Stats().AssignedIPs)
	}
	return out
}

func multiRequest(id string) *rpc.AddNetworkRequest {
	r := addRequest(id)
	r.RequiresMultiNICAttachment = true
	return r
}

func onEveryCard(n, v int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// A multi-NIC ADD gets one address per card, in card order, each with its
// card's device and route table; every card's store records it under the
// same key with the pod's interface count; the pod is annotated with card
// 0's address.
func TestAMultiNICPodGetsOneAddressPerCard(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d cards", n), func(t *testing.T) {
			pods := &podIPs{ips: map[string]string{}}
			s := serveCards(t, Options{Deps: Deps{Pods: pods}, Settings: Settings{EnableMultiNIC: true}}, onEveryCard(n, 2)...)
			r, err := s.cni.AddNetwork(context.Background(), multiRequest("m"))
			require.NoError(t, err)
			require.True(t, r.Success)
			require.Len(t, r.IPAllocationMetadata, n)
			key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "m", IfName: "eth0"}
			for card, md := range r.IPAllocationMetadata {
				ip := netip.MustParseAddr(md.IPv4Addr)
				assert.True(t, cardPrefix(card).Contains(ip), "card %d: %s", card, ip)
				assert.Empty(t, md.IPv6Addr)
				assert.Equal(t, int32(0), md.DeviceNumber, "card %d", card)
				assert.Equal(t, int32(cardTable(card)), md.RouteTableId, "card %d", card)
				a, ok := s.set.FindOnCard(card, key)
				require.True(t, ok, "card %d", card)
				assert.Equal(t, ip, a.IP)
				assert.Equal(t, n, a.Metadata.InterfacesCount)
				assert.Equal(t, "p-m", a.Metadata.K8SPodName)
			}
			annotated, _ := pods.get("default/p-m")
			assert.Equal(t, r.IPAllocationMetadata[0].IPv4Addr, annotated, "the annotation keeps card 0's address")

			again, err := s.cni.AddNetwork(context.Background(), multiRequest("m"))
			require.NoError(t, err)
			require.True(t, again.Success)
			for i := range again.IPAllocationMetadata {
				assert.Equal(t, r.IPAllocationMetadata[i].IPv4Addr, again.IPAllocationMetadata[i].IPv4Addr, "a retry gets the same addresses")
			}
			assert.Equal(t, onEveryCard(n, 1), s.assigned())
		})
	}
}

// A card without a free address fails the multi-NIC ADD as upstream
// (Success=false), the cards before it give their address back, the
// pool manager is woken, and the cause names the card when it is not
// card 0.
func TestAMultiNICAddFailsWhenACardHasNoAddressAndGivesBackTheOthers(t *testing.T) {
	for _, n := range []int{2, 4} {
		for empty := range n {
			t.Run(fmt.Sprintf("%d cards, card %d empty", n, empty), func(t *testing.T) {
				free := onEveryCard(n, 1)
				free[empty] = 0
				woken := 0
				s := serveCards(t, Options{Deps: Deps{OnExhausted: func() { woken++ }}, Settings: Settings{EnableMultiNIC: true}}, free...)
				var md metadata.MD
				r, err := s.cni.AddNetwork(context.Background(), multiRequest("m"), grpc.Trailer(&md))
				require.NoError(t, err, "a failed ADD is not a gRPC error, as upstream")
				assert.False(t, r.Success)
				assert.Empty(t, r.IPAllocationMetadata)
				assert.Equal(t, make([]int, n), s.assigned(), "nothing stays assigned on any card")
				assert.Equal(t, 1, woken)
				assert.Equal(t, 1.0, testutil.ToFloat64(s.metrics.noIP))
				lines := md.Get(AddFailureTrailer)
				require.Len(t, lines, 1)
				suffix := fmt.Sprintf("[multi-NIC pod: no address on network card %d]", empty)
				assert.Equal(t, empty > 0, strings.HasSuffix(lines[0], suffix), lines[0])
				reason, _, _ := strings.Cut(lines[0], ":")
				assert.Equal(t, 1.0, testutil.ToFloat64(s.metrics.addFailures.WithLabelValues(reason)), lines[0])

				// The given-back addresses serve the next pod at once.
				for card := range n {
					if card == empty {
						continue
					}
					st, _ := s.set.CardStats(card)
					assert.Equal(t, 1, st.AssignableIPs(), "card %d", card)
				}
			})
		}
	}
}

// The card that had no address is explained by what ipamd knows about
// that card (Deps.ExplainCard) and named; card 0 keeps Deps.Explain.
func TestAMultiNICAddFailureIsExplainedForTheExhaustedCard(t *testing.T) {
	explained := []int{}
	card0 := addfail.Cause{Reason: addfail.MaxPods, Line: "max_pods: card 0's line"}
	s := serveCards(t, Options{Deps: Deps{
		Explain: func() addfail.Cause { return card0 },
		ExplainCard: func(card int) addfail.Cause {
			explained = append(explained, card)
			return addfail.Cause{Reason: addfail.SubnetExhausted, Line: fmt.Sprintf("subnet_exhausted: card %d's subnet", card)}
		}}, Settings: Settings{EnableMultiNIC: true}}, 1, 1, 0)
	var md metadata.MD
	r, err := s.cni.AddNetwork(context.Background(), multiRequest("m"), grpc.Trailer(&md))
	require.NoError(t, err)
	assert.False(t, r.Success)
	assert.Equal(t, []string{"subnet_exhausted: card 2's subnet [multi-NIC pod: no address on network card 2]"}, md.Get(AddFailureTrailer))
	assert.Equal(t, []int{2}, explained)
	assert.Equal(t, 1.0, testutil.ToFloat64(s.metrics.addFailures.WithLabelValues(string(addfail.SubnetExhausted))))

	// A single-IP pod that found no address on any card is explained as
	// before (card 0's explanation).
	s = serveCards(t, Options{Deps: Deps{Explain: func() addfail.Cause { return card0 }}, Settings: Settings{EnableMultiNIC: true}}, 0, 0)
	_, err = s.cni.AddNetwork(context.Background(), addRequest("x"), grpc.Trailer(&md))
	require.NoError(t, err)
	assert.Equal(t, []string{card0.Line}, md.Get(AddFailureTrailer))
}

// The exhaustion path works for a multi-NIC ADD too: when the reconciler
// frees a confirmed leak, the ADD is retried and served.
func TestAnExhaustedMultiNICAddIsRetriedAfterAReclaim(t *testing.T) {
	leak := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "leaked", IfName: "eth0"}
	var s *multiServed
	reclaim := func(context.Context) bool {
		d, _ := s.set.Store(1)
		a, ok := d.Find(leak)
		if !ok {
			return false
		}
		_, err := d.ReleaseRestedIfUnchanged(a.Key, a.AssignedAt)
		return err == nil
	}
	s = serveCards(t, Options{Deps: Deps{Reclaim: reclaim}, Settings: Settings{EnableMultiNIC: true}}, 1, 1)
	d1, _ := s.set.Store(1)
	_, err := d1.Assign(leak, datastore.IPAMMetadata{})
	require.NoError(t, err)

	r, err := s.cni.AddNetwork(context.Background(), multiRequest("m"))
	require.NoError(t, err)
	require.True(t, r.Success, "served after the inline reclaim")
	require.Len(t, r.IPAllocationMetadata, 2)
	assert.Zero(t, testutil.ToFloat64(s.metrics.noIP), "a served ADD is not counted as failed")
}

// With ENABLE_MULTI_NIC off a multi-NIC ADD is refused (Success=false)
// and nothing is assigned, as upstream.
func TestAMultiNICAddWithTheFlagOffIsRefused(t *testing.T) {
	s := serveCards(t, Options{}, 2)
	r, err := s.cni.AddNetwork(context.Background(), multiRequest("m"))
	require.NoError(t, err)
	assert.False(t, r.Success)
	assert.Empty(t, r.IPAllocationMetadata)
	assert.Equal(t, []int{0}, s.assigned())
}

// A single-IP pod gets card 0's address, and the next card's only when
// card 0 has none free; a DEL finds it there.
func TestASingleIPAddFallsThroughToTheNextCard(t *testing.T) {
	s := serveCards(t, Options{Settings: Settings{EnableMultiNIC: true}}, 1, 1)
	first, err := s.cni.AddNetwork(context.Background(), addRequest("a"))
	require.NoError(t, err)
	require.True(t, first.Success)
	require.Len(t, first.IPAllocationMetadata, 1)
	assert.True(t, cardPrefix(0).Contains(netip.MustParseAddr(first.IPAllocationMetadata[0].IPv4Addr)))
	assert.Equal(t, int32(254), first.IPAllocationMetadata[0].RouteTableId)

	second, err := s.cni.AddNetwork(context.Background(), addRequest("b"))
	require.NoError(t, err)
	require.True(t, second.Success)
	require.Len(t, second.IPAllocationMetadata, 1)
	assert.True(t, cardPrefix(1).Contains(netip.MustParseAddr(second.IPAllocationMetadata[0].IPv4Addr)))
	assert.Equal(t, int32(cardTable(1)), second.IPAllocationMetadata[0].RouteTableId)
	assert.Equal(t, []int{1, 1}, s.assigned())

	third, err := s.cni.AddNetwork(context.Background(), addRequest("c"))
	require.NoError(t, err)
	assert.False(t, third.Success, "every card exhausted")

	del, err := s.cni.DelNetwork(context.Background(), delRequest("b"))
	require.NoError(t, err)
	require.Len(t, del.IPAllocationMetadata, 1)
	assert.Equal(t, second.IPAllocationMetadata[0].IPv4Addr, del.IPAllocationMetadata[0].IPv4Addr)
	assert.Equal(t, []int{1, 0}, s.assigned())
}

// A DEL frees the pod's address on every card and replies with each, in
// card order with its device and table; the annotation is cleared; a
// repeated DEL is the unknown-pod error the plugin matches.
func TestADelFreesTheAddressOnEveryCard(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d cards", n), func(t *testing.T) {
			pods := &podIPs{ips: map[string]string{}}
			s := serveCards(t, Options{Deps: Deps{Pods: pods}, Settings: Settings{EnableMultiNIC: true, NetworkPolicyMode: "standard"}}, onEveryCard(n, 2)...)
			add, err := s.cni.AddNetwork(context.Background(), multiRequest("m"))
			require.NoError(t, err)
			require.True(t, add.Success)
			single, err := s.cni.AddNetwork(context.Background(), addRequest("s"))
			require.NoError(t, err)
			require.True(t, single.Success)

			del, err := s.cni.DelNetwork(context.Background(), delRequest("m"))
			require.NoError(t, err)
			assert.True(t, del.Success)
			assert.Equal(t, "standard", del.NetworkPolicyMode)
			require.Len(t, del.IPAllocationMetadata, n)
			for card, md := range del.IPAllocationMetadata {
				assert.Equal(t, add.IPAllocationMetadata[card].IPv4Addr, md.IPv4Addr, "card %d", card)
				assert.Equal(t, int32(cardTable(card)), md.RouteTableId, "card %d", card)
			}
			want := make([]int, n)
			want[0] = 1 // the single-IP pod
			assert.Equal(t, want, s.assigned())
			annotated, _ := pods.get("default/p-m")
			assert.Empty(t, annotated, "the annotation is cleared")

			_, err = s.cni.DelNetwork(context.Background(), delRequest("m"))
			require.Error(t, err)
			assert.Equal(t, codes.Unknown, status.Code(err))
			assert.Equal(t, "datastore: unknown pod", status.Convert(err).Message())
		})
	}
}

// The network-policy agent is told whether multi-NIC is on.
func TestGetNetworkPolicyConfigsSaysWhetherMultiNICIsOn(t *testing.T) {
	for _, on := range []bool{false, true} {
		s := serveCards(t, Options{Settings: Settings{EnableMultiNIC: on}}, 1, 1)
		r, err := s.config.GetNetworkPolicyConfigs(context.Background(), &emptypb.Empty{})
		require.NoError(t, err)
		assert.Equal(t, on, r.MultiNICEnabled)
	}
}
