package awsutils

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// ErrIMDSOnly: an EC2 call was refused because ENABLE_IMDS_ONLY_MODE is on.
var ErrIMDSOnly = errors.New("refused in IMDS-only mode (ENABLE_IMDS_ONLY_MODE=true)")

// allowedInIMDSOnly says which EC2 actions may still be sent in IMDS-only
// mode: reads that upstream still makes there (instance-type limits for a
// type missing from the table, subnet checks), never
// DescribeNetworkInterfaces (the ENI view comes from IMDS) and never a
// call that changes anything.
func allowedInIMDSOnly(action string) bool {
	return strings.HasPrefix(action, "Describe") && action != "DescribeNetworkInterfaces"
}

// addIMDSOnlyGuard refuses, before anything is sent, every EC2 request
// allowedInIMDSOnly rejects. It sits in the client, so no caller (pool
// manager, ENI sync, sweep, tagging) can get past it.
func addIMDSOnlyGuard(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("IMDSOnlyGuard",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if op := awsmiddleware.GetOperationName(ctx); !allowedInIMDSOnly(op) {
				return middleware.InitializeOutput{}, middleware.Metadata{}, fmt.Errorf("ec2 %s: %w", op, ErrIMDSOnly)
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After) // after the operation name is registered
}

// imdsENIs is the ENI view of IMDS-only mode: the attached ENIs as IMDS
// shows them. IMDS shows no tags (Tags is nil: unknown, not "none") and no
// interface type; every ENI it lists is attached.
func (c *Client) imdsENIs(ctx context.Context) ([]ENI, error) {
	md, err := c.AttachedENIs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ENI, 0, len(md))
	for _, m := range md {
		if m.SubnetCIDR.IsValid() {
			c.rememberSubnetCIDR(m.SubnetID, m.SubnetCIDR)
		}
		out = append(out, ENI{
			ID: m.ENIID, MAC: m.MAC, SubnetID: m.SubnetID, Status: "in-use",
			Attached: true, AttachmentStatus: "attached", AttachedTo: c.Identity.InstanceID, DeviceNumber: m.DeviceNumber, NetworkCard: m.NetworkCard,
			PrimaryIP: m.PrimaryIP, SecondaryIPs: m.SecondaryIPs, Prefixes: m.Prefixes, IPv6Prefixes: m.IPv6Prefixes,
		})
	}
	return out, nil
}

// imdsDescribe is DescribeENIs in IMDS-only mode: the named ENIs from
// IMDS; one IMDS does not show is ErrNotFound, as EC2 would say.
func (c *Client) imdsDescribe(ctx context.Context, ids []string) ([]ENI, error) {
	all, err := c.imdsENIs(ctx)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]ENI, len(all))
	for _, e := range all {
		byID[e.ID] = e
	}
	out := make([]ENI, 0, len(ids))
	for _, id := range ids {
		e, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("ENI %s is not attached according to IMDS: %w", id, ErrNotFound)
		}
		out = append(out, e)
	}
	return out, nil
}

// rememberSubnetCIDR fills the subnet cache from IMDS, so SubnetCIDR needs
// no DescribeSubnets for a subnet IMDS has shown.
func (c *Client) rememberSubnetCIDR(subnetID string, p netip.Prefix) {
	c.subnets.mu.Lock()
	defer c.subnets.mu.Unlock()
	if c.subnets.cidrs == nil {
		c.subnets.cidrs = map[string]netip.Prefix{}
	}
	c.subnets.cidrs[subnetID] = p
}
