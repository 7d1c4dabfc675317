package awsutils

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// subnetCache remembers subnet CIDRs, which never change.
type subnetCache struct {
	mu    sync.Mutex
	cidrs map[string]netip.Prefix
}

// SubnetCIDR returns a subnet's IPv4 CIDR (DescribeSubnets, cached).
func (c *Client) SubnetCIDR(ctx context.Context, subnetID string) (netip.Prefix, error) {
	c.subnets.mu.Lock()
	p, ok := c.subnets.cidrs[subnetID]
	c.subnets.mu.Unlock()
	if ok {
		return p, nil
	}
	out, err := ec2Call(ctx, "DescribeSubnets", func(ctx context.Context) (*ec2.DescribeSubnetsOutput, error) {
		return c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnetID}})
	})
	if err != nil {
		return netip.Prefix{}, err
	}
	if len(out.Subnets) != 1 {
		return netip.Prefix{}, fmt.Errorf("DescribeSubnets %s: %d subnets returned", subnetID, len(out.Subnets))
	}
	c.recordSubnets(subnetFromSDK(out.Subnets[0]))
	p, err = netip.ParsePrefix(aws.ToString(out.Subnets[0].CidrBlock))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("DescribeSubnets %s: %w", subnetID, err)
	}
	c.subnets.mu.Lock()
	if c.subnets.cidrs == nil {
		c.subnets.cidrs = map[string]netip.Prefix{}
	}
	c.subnets.cidrs[subnetID] = p
	c.subnets.mu.Unlock()
	return p, nil
}

// azSubnets lists the subnets of the instance's VPC in its AZ
// (DescribeSubnets filtered by vpc-id and availability-zone), the only
// subnets an ENI attachable to this instance can be in.
func (c *Client) azSubnets(ctx context.Context) ([]Subnet, error) {
	in := &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("vpc-id"), Values: []string{c.Identity.VPCID}},
		{Name: aws.String("availability-zone"), Values: []string{c.Identity.AZ}},
	}}
	var out []Subnet
	p := ec2.NewDescribeSubnetsPaginator(c.ec2, in)
	for p.HasMorePages() {
		page, err := ec2Call(ctx, "DescribeSubnets", func(ctx context.Context) (*ec2.DescribeSubnetsOutput, error) {
			return p.NextPage(ctx)
		})
		if err != nil {
			return nil, err
		}
		for _, s := range page.Subnets {
			out = append(out, subnetFromSDK(s))
		}
	}
	c.recordSubnets(out...)
	return out, nil
}

// describeSubnet returns one subnet by ID.
func (c *Client) describeSubnet(ctx context.Context, id string) (*Subnet, error) {
	out, err := ec2Call(ctx, "DescribeSubnets", func(ctx context.Context) (*ec2.DescribeSubnetsOutput, error) {
		return c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{id}})
	})
	if err != nil {
		return nil, err
	}
	if len(out.Subnets) != 1 {
		return nil, fmt.Errorf("DescribeSubnets %s: %d subnets returned", id, len(out.Subnets))
	}
	s := subnetFromSDK(out.Subnets[0])
	c.recordSubnets(s)
	return &s, nil
}

func subnetFromSDK(s types.Subnet) Subnet {
	out := Subnet{ID: aws.ToString(s.SubnetId), VPCID: aws.ToString(s.VpcId), AZ: aws.ToString(s.AvailabilityZone), CIDR: aws.ToString(s.CidrBlock),
		AvailableIPs: int(aws.ToInt32(s.AvailableIpAddressCount)), Tags: map[string]string{}}
	for _, t := range s.Tags {
		out.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}

// eniSubnets asks EC2 what ChooseENISubnets needs and returns the subnets
// a new ENI may go in, best first. A failed listing or exclusion check is
// logged and decided as upstream does (the primary subnet is used).
func (c *Client) eniSubnets(ctx context.Context, discovery bool) ([]string, error) {
	q := SubnetQuery{Discovery: discovery, PrimaryID: c.Identity.SubnetID, Cluster: c.opts.ClusterName}
	if discovery {
		list, err := c.azSubnets(ctx)
		if err == nil {
			q.Listing, q.Listed = list, true
		} else {
			c.log.Warn("subnet discovery: DescribeSubnets failed; using the primary ENI's subnet unless it is excluded", "error", err)
		}
	}
	if !q.Listed {
		p, err := c.describeSubnet(ctx, q.PrimaryID)
		if err != nil {
			c.log.Warn("could not check whether the primary subnet is excluded; using it", "subnet", q.PrimaryID, "error", err)
		}
		q.Primary = p
	}
	subnets, err := ChooseENISubnets(q)
	if err != nil {
		return nil, fmt.Errorf("subnet for a new ENI (ENABLE_SUBNET_DISCOVERY=%t, primary %s): %w", discovery, q.PrimaryID, err)
	}
	return subnets, nil
}

// SubnetsByID describes the given subnets (one DescribeSubnets call), for
// re-checking the tags of the subnets ipamd's ENIs are in.
func (c *Client) SubnetsByID(ctx context.Context, ids []string) ([]Subnet, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := ec2Call(ctx, "DescribeSubnets", func(ctx context.Context) (*ec2.DescribeSubnetsOutput, error) {
		return c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: ids})
	})
	if err != nil {
		return nil, fmt.Errorf("DescribeSubnets %v: %w", ids, err)
	}
	subnets := make([]Subnet, 0, len(out.Subnets))
	for _, s := range out.Subnets {
		subnets = append(subnets, subnetFromSDK(s))
	}
	c.recordSubnets(subnets...)
	return subnets, nil
}

// ExcludedSubnets reports, for each given subnet, whether its tags keep pod
// IPs out of it now (SubnetExcluded with CLUSTER_NAME). ipamd re-checks its
// ENIs' subnets with it, so a subnet tagged after an ENI went in is seen.
func (c *Client) ExcludedSubnets(ctx context.Context, ids []string) (map[string]bool, error) {
	subnets, err := c.SubnetsByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(subnets))
	for _, s := range subnets {
		out[s.ID] = SubnetExcluded(s.Tags, c.opts.ClusterName)
	}
	return out, nil
}

// checkNamedSubnet confirms that a subnet named for new ENIs (custom
// networking's ENIConfig) exists in the instance's VPC and availability
// zone: an ENI elsewhere could be created but never attached. One
// DescribeSubnets call per new ENI; failures wrap ErrPlacement.
func (c *Client) checkNamedSubnet(ctx context.Context, id string) error {
	s, err := c.describeSubnet(ctx, id)
	switch {
	case errors.Is(err, ErrPlacement):
		return fmt.Errorf("subnet %s does not exist: %w", id, err)
	case err != nil:
		return fmt.Errorf("check subnet %s: %w", id, err)
	case s.VPCID != "" && s.VPCID != c.Identity.VPCID:
		return fmt.Errorf("%w: subnet %s is in %s, the instance in %s", ErrPlacement, id, s.VPCID, c.Identity.VPCID)
	case s.AZ != "" && s.AZ != c.Identity.AZ:
		return fmt.Errorf("%w: subnet %s is in availability zone %s, the instance in %s", ErrPlacement, id, s.AZ, c.Identity.AZ)
	}
	return nil
}
