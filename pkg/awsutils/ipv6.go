package awsutils

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// IPv6 mode (ENABLE_IPv6): the node's own IPv6 address and the VPC's IPv6
// CIDRs come from IMDS at start, and pods take addresses from one /80
// prefix on the primary ENI, assigned through EC2 if it has none.

// readIPv6Identity fills the IPv6 fields of id (Options.IPv6 only): the
// node's address (IMDS ipv6, required) and the VPC's IPv6 CIDR blocks.
func (c *Client) readIPv6Identity(ctx context.Context, id *Identity) error {
	s, err := c.get(ctx, "ipv6")
	if errors.Is(err, errIMDSNotFound) {
		return errors.New("ENABLE_IPv6=true but the instance has no IPv6 address (IMDS ipv6): launch it in a subnet with an IPv6 CIDR and an IPv6 address")
	}
	if err != nil {
		return err
	}
	if id.PrimaryIPv6, err = netip.ParseAddr(s); err != nil || !id.PrimaryIPv6.Is6() {
		return fmt.Errorf("imds ipv6 %q is not an IPv6 address", s)
	}
	id.VPCIPv6CIDRs, err = c.vpcIPv6CIDRs(ctx, id.PrimaryMAC)
	return err
}

// VPCIPv6CIDRs re-reads the VPC's IPv6 CIDR blocks from IMDS (none when
// the VPC has no IPv6), for the periodic refresh in IPv6 mode.
func (c *Client) VPCIPv6CIDRs(ctx context.Context) ([]netip.Prefix, error) {
	return c.vpcIPv6CIDRs(ctx, c.Identity.PrimaryMAC)
}

func (c *Client) vpcIPv6CIDRs(ctx context.Context, mac string) ([]netip.Prefix, error) {
	return c.optionalPrefixes(ctx, "network/interfaces/macs/"+mac+"/vpc-ipv6-cidr-blocks")
}

// PrimaryIPv6Prefix returns the primary ENI's IPv6 prefix, assigning one
// /80 through EC2 (AssignIpv6Addresses with Ipv6PrefixCount=1) when it has
// none, as upstream's node init does. With several, the first is used.
// In IMDS-only mode nothing is assigned: the prefix must already be there.
// assigned says the prefix is new, so no pod can hold an address in it.
func (c *Client) PrimaryIPv6Prefix(ctx context.Context) (p netip.Prefix, assigned bool, err error) {
	enis, err := c.DescribeENIs(ctx, []string{c.Identity.PrimaryENIID})
	if err != nil {
		return netip.Prefix{}, false, fmt.Errorf("describe the primary ENI: %w", err)
	}
	if len(enis) == 1 && len(enis[0].IPv6Prefixes) > 0 {
		return enis[0].IPv6Prefixes[0], false, nil
	}
	if c.opts.IMDSOnly {
		return netip.Prefix{}, false, errors.New("ENABLE_IMDS_ONLY_MODE=true: the primary ENI has no IPv6 prefix and ipamd may not assign one")
	}
	out, err := ec2Call(ctx, "AssignIpv6Addresses", func(ctx context.Context) (*ec2.AssignIpv6AddressesOutput, error) {
		return c.ec2.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{
			NetworkInterfaceId: aws.String(c.Identity.PrimaryENIID), Ipv6PrefixCount: aws.Int32(1)})
	})
	if err != nil {
		return netip.Prefix{}, false, err
	}
	for _, s := range out.AssignedIpv6Prefixes {
		if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is6() {
			c.log.Info("assigned an IPv6 prefix to the primary ENI", "eni", c.Identity.PrimaryENIID, "prefix", p.String())
			return p, true, nil
		}
	}
	return netip.Prefix{}, false, fmt.Errorf("AssignIpv6Addresses on %s returned no IPv6 prefix", c.Identity.PrimaryENIID)
}
