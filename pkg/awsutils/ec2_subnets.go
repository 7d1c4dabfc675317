package awsutils

import (
	"context"
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
	return &s, nil
}

func subnetFromSDK(s types.Subnet) Subnet {
	out := Subnet{ID: aws.ToString(s.SubnetId), AvailableIPs: int(aws.ToInt32(s.AvailableIpAddressCount)), Tags: map[string]string{}}
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
