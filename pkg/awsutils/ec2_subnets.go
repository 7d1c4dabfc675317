package awsutils

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
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
