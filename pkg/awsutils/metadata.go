package awsutils

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Identity is what IMDS says about this instance.
type Identity struct {
	Region, AZ, InstanceID, InstanceType string
	PrimaryMAC, PrimaryENIID             string
	PrimaryIP                            netip.Addr
	SubnetID, VPCID                      string
	VPCCIDRs                             []netip.Prefix
	// IPv6 mode only (Options.IPv6): the node's IPv6 address and the
	// VPC's IPv6 CIDR blocks.
	PrimaryIPv6  netip.Addr
	VPCIPv6CIDRs []netip.Prefix
}

// ENIMetadata is one attached ENI as IMDS shows it.
type ENIMetadata struct {
	ENIID        string
	MAC          string
	DeviceNumber int
	NetworkCard  int
	SubnetID     string
	SubnetCIDR   netip.Prefix
	// PrimaryIP is the ENI's own address; SecondaryIPs excludes it.
	PrimaryIP    netip.Addr
	SecondaryIPs []netip.Addr
	Prefixes     []netip.Prefix
	IPv6Prefixes []netip.Prefix // IPv6 mode only (ipv6-prefix)
}

var errIMDSNotFound = errors.New("imds: not found")

// get reads one IMDS path under /latest/meta-data/.
func (c *Client) get(ctx context.Context, path string) (string, error) {
	out, err := c.imds.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == 404 {
			return "", fmt.Errorf("imds %s: %w", path, errIMDSNotFound)
		}
		apiErrors.WithLabelValues("GetMetadata", "").Inc()
		return "", fmt.Errorf("imds %s: %w", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	if err != nil {
		return "", fmt.Errorf("imds %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (c *Client) readIdentity(ctx context.Context) (Identity, error) {
	var id Identity
	region, err := c.imds.GetRegion(ctx, &imds.GetRegionInput{})
	if err != nil {
		return id, fmt.Errorf("imds region: %w", err)
	}
	id.Region = region.Region
	fields := []struct {
		path string
		dst  *string
	}{
		{"placement/availability-zone", &id.AZ},
		{"instance-id", &id.InstanceID},
		{"instance-type", &id.InstanceType},
		{"mac", &id.PrimaryMAC},
	}
	for _, f := range fields {
		if *f.dst, err = c.get(ctx, f.path); err != nil {
			return id, err
		}
	}
	ip, err := c.get(ctx, "local-ipv4")
	if err != nil {
		return id, err
	}
	if id.PrimaryIP, err = netip.ParseAddr(ip); err != nil {
		return id, fmt.Errorf("imds local-ipv4 %q: %w", ip, err)
	}
	base := "network/interfaces/macs/" + id.PrimaryMAC + "/"
	if id.PrimaryENIID, err = c.get(ctx, base+"interface-id"); err != nil {
		return id, err
	}
	if id.SubnetID, err = c.get(ctx, base+"subnet-id"); err != nil {
		return id, err
	}
	if id.VPCID, err = c.get(ctx, base+"vpc-id"); err != nil {
		return id, err
	}
	if id.VPCCIDRs, err = c.vpcCIDRs(ctx, id.PrimaryMAC); err != nil {
		return id, err
	}
	if c.opts.IPv6 {
		if err := c.readIPv6Identity(ctx, &id); err != nil {
			return id, err
		}
	}
	return id, nil
}

// VPCIPv4CIDRs re-reads the VPC's IPv4 CIDR blocks (primary and secondary)
// from IMDS: blocks can be associated with the VPC while nodes run.
func (c *Client) VPCIPv4CIDRs(ctx context.Context) ([]netip.Prefix, error) {
	return c.vpcCIDRs(ctx, c.Identity.PrimaryMAC)
}

func (c *Client) vpcCIDRs(ctx context.Context, mac string) ([]netip.Prefix, error) {
	s, err := c.get(ctx, "network/interfaces/macs/"+mac+"/vpc-ipv4-cidr-blocks")
	if err != nil {
		return nil, err
	}
	cidrs, err := parsePrefixes(s)
	if err != nil {
		return nil, fmt.Errorf("imds vpc-ipv4-cidr-blocks: %w", err)
	}
	if len(cidrs) == 0 {
		return nil, errors.New("imds vpc-ipv4-cidr-blocks: empty")
	}
	return cidrs, nil
}

// AttachedENIs lists the ENIs IMDS shows as attached, with their addresses.
// IMDS can lag EC2: callers must not remove an address because IMDS lacks it
// without asking EC2 (see DescribeENIs).
func (c *Client) AttachedENIs(ctx context.Context) ([]ENIMetadata, error) {
	macs, err := c.get(ctx, "network/interfaces/macs")
	if err != nil {
		return nil, err
	}
	var out []ENIMetadata
	for _, mac := range strings.Fields(macs) {
		mac = strings.TrimSuffix(mac, "/")
		e, err := c.eniMetadata(ctx, mac)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func (c *Client) eniMetadata(ctx context.Context, mac string) (ENIMetadata, error) {
	e := ENIMetadata{MAC: mac}
	base := "network/interfaces/macs/" + mac + "/"
	var err error
	if e.ENIID, err = c.get(ctx, base+"interface-id"); err != nil {
		return e, err
	}
	dev, err := c.get(ctx, base+"device-number")
	if err != nil {
		return e, err
	}
	if e.DeviceNumber, err = strconv.Atoi(dev); err != nil {
		return e, fmt.Errorf("imds device-number %q for %s: %w", dev, mac, err)
	}
	if card, err := c.get(ctx, base+"network-card"); err == nil {
		e.NetworkCard, _ = strconv.Atoi(card)
	} else if !errors.Is(err, errIMDSNotFound) {
		return e, err
	}
	if e.SubnetID, err = c.get(ctx, base+"subnet-id"); err != nil {
		return e, err
	}
	subnet, err := c.get(ctx, base+"subnet-ipv4-cidr-block")
	if err != nil {
		return e, err
	}
	if e.SubnetCIDR, err = netip.ParsePrefix(subnet); err != nil {
		return e, fmt.Errorf("imds subnet-ipv4-cidr-block %q: %w", subnet, err)
	}
	ips, err := c.get(ctx, base+"local-ipv4s")
	if errors.Is(err, errIMDSNotFound) {
		ips, err = c.addressFreeENI(ctx, base)
	}
	if err != nil {
		return e, err
	}
	for i, s := range strings.Fields(ips) {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return e, fmt.Errorf("imds local-ipv4s %q for %s: %w", s, mac, err)
		}
		if i == 0 {
			e.PrimaryIP = ip
		} else {
			e.SecondaryIPs = append(e.SecondaryIPs, ip)
		}
	}
	if e.Prefixes, err = c.optionalPrefixes(ctx, base+"ipv4-prefix"); err != nil {
		return e, err
	}
	if c.opts.IPv6 {
		if e.IPv6Prefixes, err = c.optionalPrefixes(ctx, base+"ipv6-prefix"); err != nil {
			return e, err
		}
	}
	return e, nil
}

// addressFreeENI answers for an ENI whose local-ipv4s IMDS did not
// find: an EFA-only ENI, which has no IP address, is one whose field list
// names neither local-ipv4s nor ipv6s (as upstream, it is shown with empty
// address lists); any other ENI's missing addresses are an error, for IMDS
// has not caught up with it yet and the read is tried again later.
func (c *Client) addressFreeENI(ctx context.Context, base string) (string, error) {
	listing, err := c.get(ctx, base)
	if err != nil {
		return "", err
	}
	for _, f := range strings.Fields(listing) {
		if f == "local-ipv4s" || f == "ipv6s" {
			return "", fmt.Errorf("imds %slocal-ipv4s: listed but not found (IMDS not caught up yet): %w", base, errIMDSNotFound)
		}
	}
	return "", nil
}

// optionalPrefixes reads a list of prefixes IMDS may not have (404: none).
func (c *Client) optionalPrefixes(ctx context.Context, path string) ([]netip.Prefix, error) {
	s, err := c.get(ctx, path)
	switch {
	case errors.Is(err, errIMDSNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	ps, err := parsePrefixes(s)
	if err != nil {
		return nil, fmt.Errorf("imds %s: %w", path, err)
	}
	return ps, nil
}

func parsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Fields(s) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
