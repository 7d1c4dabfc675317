package ec2fault_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2fault"
)

// kinds are the corruptions, each with what the SDK should then see of
// the simulator's true ENI (nil: not listed at all).
var kinds = []struct {
	name  string
	fault func(n *node) ec2fault.Fault // Match and Times left to the test
	want  func(n *node, e types.NetworkInterface) *types.NetworkInterface
}{
	{
		name:  "drop ENI",
		fault: func(n *node) ec2fault.Fault { return ec2fault.Fault{ENI: n.eni, DropENI: true} },
		want:  func(*node, types.NetworkInterface) *types.NetworkInterface { return nil },
	},
	{
		name:  "drop IPv4 prefix",
		fault: func(n *node) ec2fault.Fault { return ec2fault.Fault{ENI: n.eni, DropPrefix: n.prefixes[0]} },
		want: func(n *node, e types.NetworkInterface) *types.NetworkInterface {
			e.Ipv4Prefixes = slices.DeleteFunc(slices.Clone(e.Ipv4Prefixes), func(p types.Ipv4PrefixSpecification) bool {
				return aws.ToString(p.Ipv4Prefix) == n.prefixes[0].String()
			})
			return &e
		},
	},
	{
		name:  "drop IPv6 prefix",
		fault: func(n *node) ec2fault.Fault { return ec2fault.Fault{ENI: n.eni, DropPrefix: n.ipv6Prefixes[1]} },
		want: func(n *node, e types.NetworkInterface) *types.NetworkInterface {
			e.Ipv6Prefixes = slices.DeleteFunc(slices.Clone(e.Ipv6Prefixes), func(p types.Ipv6PrefixSpecification) bool {
				return aws.ToString(p.Ipv6Prefix) == n.ipv6Prefixes[1].String()
			})
			return &e
		},
	},
	{
		name:  "drop secondary address",
		fault: func(n *node) ec2fault.Fault { return ec2fault.Fault{ENI: n.eni, DropAddress: n.secondaries[0]} },
		want: func(n *node, e types.NetworkInterface) *types.NetworkInterface {
			e.PrivateIpAddresses = slices.DeleteFunc(slices.Clone(e.PrivateIpAddresses), func(p types.NetworkInterfacePrivateIpAddress) bool {
				return aws.ToString(p.PrivateIpAddress) == n.secondaries[0].String()
			})
			return &e
		},
	},
	{
		name:  "attachment detaching",
		fault: func(n *node) ec2fault.Fault { return ec2fault.Fault{ENI: n.eni, AttachmentStatus: "detaching"} },
		want: func(_ *node, e types.NetworkInterface) *types.NetworkInterface {
			a := *e.Attachment
			a.Status = types.AttachmentStatusDetaching
			e.Attachment = &a
			return &e
		},
	},
}

// corrupted is the truth with the second ENI as want makes it.
func corrupted(n *node, truth []types.NetworkInterface, want func(*node, types.NetworkInterface) *types.NetworkInterface) []types.NetworkInterface {
	out := []types.NetworkInterface{} // the SDK's reading of an empty set
	for _, e := range truth {
		if aws.ToString(e.NetworkInterfaceId) != n.eni {
			out = append(out, e)
		} else if w := want(n, e); w != nil {
			out = append(out, *w)
		}
	}
	return out
}

// Every kind of fault, matched by filter, by ID or any describe, changes
// exactly the one answer it matches, as the SDK parses it, and an answer
// of the other kind before it is left alone.
func TestFaultKinds(t *testing.T) {
	for _, k := range kinds {
		for _, m := range []ec2fault.Match{ec2fault.ByFilter, ec2fault.ByID, ec2fault.AnyDescribe} {
			t.Run(k.name+"/"+m.String(), func(t *testing.T) {
				n := newNode(t)
				f := k.fault(n)
				f.Match = m
				n.proxy.Add(f)
				require.Equal(t, 1, n.proxy.Pending())

				match, other := n.byFilter(), n.byID()
				if m == ec2fault.ByID {
					match, other = other, match
				}
				if m != ec2fault.AnyDescribe {
					require.Equal(t, n.truthOf(t, other), n.describe(t, other), "a call of the other kind is not corrupted")
					require.Equal(t, 1, n.proxy.Pending())
				}

				got := n.describe(t, match)
				truth := n.truthOf(t, match)
				require.NotNil(t, find(truth, n.eni))
				require.Equal(t, corrupted(n, truth, k.want), got)
				require.Equal(t, 1, n.proxy.Applied())
				require.Equal(t, 0, n.proxy.Pending())

				for _, in := range []*ec2.DescribeNetworkInterfacesInput{match, other} {
					require.Equal(t, n.truthOf(t, in), n.describe(t, in), "the fault is used up")
				}
				require.Equal(t, 1, n.proxy.Applied())
			})
		}
	}
}

// A fault corrupts the next Times matching answers, then no more.
func TestTimes(t *testing.T) {
	for _, times := range []int{0, 1, 3} {
		t.Run("", func(t *testing.T) {
			n := newNode(t)
			n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByID, Times: times, ENI: n.eni, DropAddress: n.secondaries[1]})
			want := max(times, 1)
			for i := range want {
				require.Equal(t, want-i, n.proxy.Pending())
				e := find(n.describe(t, n.byID()), n.eni)
				require.NotNil(t, e)
				require.Len(t, e.PrivateIpAddresses, 2, "answer %d: primary and one secondary", i+1)
			}
			require.Equal(t, 0, n.proxy.Pending())
			require.Equal(t, want, n.proxy.Applied())
			require.Len(t, find(n.describe(t, n.byID()), n.eni).PrivateIpAddresses, 3)
		})
	}
}

// An answer that does not list the fault's ENI does not use it up.
func TestAnswerWithoutTheENIKeepsTheFault(t *testing.T) {
	n := newNode(t)
	primary := n.sim.PrimaryENI()
	n.proxy.Add(ec2fault.Fault{ENI: n.eni, DropENI: true})
	other := &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{primary}}
	for range 3 {
		require.Equal(t, n.truthOf(t, other), n.describe(t, other))
	}
	require.Equal(t, 1, n.proxy.Pending())
	require.Equal(t, 0, n.proxy.Applied())

	require.Equal(t, []string{primary}, ids(n.describe(t, n.byFilter())))
	require.Equal(t, 0, n.proxy.Pending())
	require.Equal(t, 1, n.proxy.Applied())
}

// Several faults matching one answer all apply, each using one answer.
func TestSeveralFaultsOneAnswer(t *testing.T) {
	n := newNode(t)
	primary := n.sim.PrimaryENI()
	n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByFilter, ENI: n.eni, DropPrefix: n.prefixes[1]})
	n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByFilter, ENI: n.eni, DropAddress: n.secondaries[0]})
	n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByFilter, Times: 2, ENI: n.eni, AttachmentStatus: "attaching"})
	n.proxy.Add(ec2fault.Fault{Match: ec2fault.AnyDescribe, ENI: primary, DropENI: true})
	n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByID, ENI: n.eni, DropENI: true}) // not this call's kind

	got := n.describe(t, n.byFilter())
	require.Equal(t, []string{n.eni}, ids(got))
	e := got[0]
	require.Equal(t, []types.Ipv4PrefixSpecification{{Ipv4Prefix: aws.String(n.prefixes[0].String())}}, e.Ipv4Prefixes)
	require.Len(t, e.PrivateIpAddresses, 2)
	require.True(t, aws.ToBool(e.PrivateIpAddresses[0].Primary))
	require.Equal(t, n.secondaries[1].String(), aws.ToString(e.PrivateIpAddresses[1].PrivateIpAddress))
	require.Equal(t, types.AttachmentStatusAttaching, e.Attachment.Status)
	require.Len(t, e.Ipv6Prefixes, 2, "untouched")
	require.Equal(t, 4, n.proxy.Applied())
	require.Equal(t, 2, n.proxy.Pending(), "one more attaching answer and the ByID drop")
}

// Faults on an ENI listed on a later page wait for it, and a corrupted
// page keeps its nextToken.
func TestPagination(t *testing.T) {
	n := newNode(t)
	for range 6 {
		_, err := n.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(n.sim.SubnetIDs()[0])})
		require.NoError(t, err)
	}
	in := &ec2.DescribeNetworkInterfacesInput{
		Filters:    []types.Filter{{Name: aws.String("vpc-id"), Values: []string{n.sim.VPCID()}}},
		MaxResults: aws.Int32(5),
	}
	var all []types.NetworkInterface
	for p := ec2.NewDescribeNetworkInterfacesPaginator(n.truth, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		all = append(all, page.NetworkInterfaces...)
	}
	require.Len(t, all, 8)
	first, last := ids(all)[0], ids(all)[7]
	n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByFilter, ENI: first, DropENI: true})
	n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByFilter, ENI: last, DropENI: true})

	p := ec2.NewDescribeNetworkInterfacesPaginator(n.ec2, in)
	page, err := p.NextPage(ctx)
	require.NoError(t, err)
	require.Equal(t, ids(all)[1:5], ids(page.NetworkInterfaces))
	require.NotEmpty(t, aws.ToString(page.NextToken))
	truth, err := n.truth.DescribeNetworkInterfaces(ctx, in)
	require.NoError(t, err)
	require.Equal(t, truth.NextToken, page.NextToken)
	require.Equal(t, 1, n.proxy.Pending(), "the last ENI is not on page one")

	require.True(t, p.HasMorePages())
	page, err = p.NextPage(ctx)
	require.NoError(t, err)
	require.Equal(t, ids(all)[5:7], ids(page.NetworkInterfaces))
	require.Nil(t, page.NextToken)
	require.False(t, p.HasMorePages())
	require.Equal(t, 0, n.proxy.Pending())
	require.Equal(t, 2, n.proxy.Applied())
}

// Add refuses a fault that names no ENI or not exactly one corruption.
func TestAddValidates(t *testing.T) {
	p := ec2fault.Start(t, "http://127.0.0.1:1")
	pfx := netip.MustParsePrefix("10.0.0.16/28")
	ip := netip.MustParseAddr("10.0.0.5")
	for name, f := range map[string]ec2fault.Fault{
		"no ENI":          {DropENI: true},
		"no corruption":   {ENI: "eni-1"},
		"two corruptions": {ENI: "eni-1", DropENI: true, DropPrefix: pfx},
		"all four":        {ENI: "eni-1", DropENI: true, DropPrefix: pfx, DropAddress: ip, AttachmentStatus: "attaching"},
		"negative times":  {ENI: "eni-1", DropENI: true, Times: -1},
		"unknown match":   {ENI: "eni-1", DropENI: true, Match: ec2fault.ByID + 1},
		"IPv6 address":    {ENI: "eni-1", DropAddress: netip.MustParseAddr("2600::1")},
	} {
		require.Panics(t, func() { p.Add(f) }, name)
	}
	require.Equal(t, 0, p.Pending())
	p.Add(ec2fault.Fault{ENI: "eni-1", DropAddress: ip, Times: 2})
	require.Equal(t, 2, p.Pending())
}
