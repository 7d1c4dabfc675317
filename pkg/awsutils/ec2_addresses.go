package awsutils

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// AssignIPs adds n secondary IPv4 addresses to an ENI and returns them.
func (c *Client) AssignIPs(ctx context.Context, eniID string, n int) ([]netip.Addr, error) {
	if n < 1 {
		return nil, nil
	}
	out, err := ec2Call(ctx, "AssignPrivateIpAddresses", func(ctx context.Context) (*ec2.AssignPrivateIpAddressesOutput, error) {
		return c.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
			NetworkInterfaceId:             aws.String(eniID),
			SecondaryPrivateIpAddressCount: aws.Int32(int32(n)),
		})
	})
	if err != nil {
		return nil, err
	}
	ips := make([]netip.Addr, 0, len(out.AssignedPrivateIpAddresses))
	for _, a := range out.AssignedPrivateIpAddresses {
		ip, err := netip.ParseAddr(aws.ToString(a.PrivateIpAddress))
		if err != nil {
			return ips, fmt.Errorf("AssignPrivateIpAddresses returned %q: %w", aws.ToString(a.PrivateIpAddress), err)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

// AssignPrefixes adds n /28 prefixes to an ENI and returns them.
func (c *Client) AssignPrefixes(ctx context.Context, eniID string, n int) ([]netip.Prefix, error) {
	if n < 1 {
		return nil, nil
	}
	out, err := ec2Call(ctx, "AssignPrivateIpAddresses", func(ctx context.Context) (*ec2.AssignPrivateIpAddressesOutput, error) {
		return c.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
			NetworkInterfaceId: aws.String(eniID),
			Ipv4PrefixCount:    aws.Int32(int32(n)),
		})
	})
	if err != nil {
		return nil, err
	}
	ps := make([]netip.Prefix, 0, len(out.AssignedIpv4Prefixes))
	for _, a := range out.AssignedIpv4Prefixes {
		p, err := netip.ParsePrefix(aws.ToString(a.Ipv4Prefix))
		if err != nil {
			return ps, fmt.Errorf("AssignPrivateIpAddresses returned prefix %q: %w", aws.ToString(a.Ipv4Prefix), err)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// UnassignIPs returns secondary IPv4 addresses of an ENI to the subnet.
func (c *Client) UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error {
	if len(ips) == 0 {
		return nil
	}
	strs := make([]string, len(ips))
	for i, ip := range ips {
		strs[i] = ip.String()
	}
	_, err := ec2Call(ctx, "UnassignPrivateIpAddresses", func(ctx context.Context) (*ec2.UnassignPrivateIpAddressesOutput, error) {
		return c.ec2.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eniID), PrivateIpAddresses: strs})
	})
	return err
}

// UnassignPrefixes returns /28 prefixes of an ENI to the subnet.
func (c *Client) UnassignPrefixes(ctx context.Context, eniID string, ps []netip.Prefix) error {
	if len(ps) == 0 {
		return nil
	}
	strs := make([]string, len(ps))
	for i, p := range ps {
		strs[i] = p.String()
	}
	_, err := ec2Call(ctx, "UnassignPrivateIpAddresses", func(ctx context.Context) (*ec2.UnassignPrivateIpAddressesOutput, error) {
		return c.ec2.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eniID), Ipv4Prefixes: strs})
	})
	return err
}
