package awsutils

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/ctxtime"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Tag keys upstream puts on (and reads from) ENIs.
const (
	TagInstanceID = "node.k8s.amazonaws.com/instance_id"
	TagCreatedAt  = "node.k8s.amazonaws.com/createdAt"
	TagNoManage   = "node.k8s.amazonaws.com/no_manage"
	TagCluster    = "cluster.k8s.amazonaws.com/name"
	TagOwner      = "eks:eni:owner"
	// ENIDescriptionPrefix starts the description of every ENI ipamd creates.
	ENIDescriptionPrefix = "aws-K8S-"
	maxDeviceIndex       = 100
)

// InterfaceTypeTrunk is EC2's InterfaceType of a trunk ENI (security
// groups for pods: the VPC resource controller attaches it, and branch
// ENIs ride on it as VLANs).
const InterfaceTypeTrunk = "trunk"

// ENI is one ENI as EC2 reports it: the source of truth that IMDS lags.
type ENI struct {
	ID, MAC, SubnetID, Description, Status, InterfaceType string
	Attached                                              bool
	AttachmentID                                          string
	// AttachmentStatus is EC2's attachment state ("attaching", "attached",
	// "detaching", "detached"; empty when unattached), AttachedTo the
	// instance it names. Attached is AttachmentStatus == "attached".
	AttachmentStatus, AttachedTo string
	DeviceNumber, NetworkCard    int
	DeleteOnTermination          bool
	PrimaryIP                    netip.Addr
	SecondaryIPs                 []netip.Addr
	Prefixes                     []netip.Prefix
	IPv6Addrs                    []netip.Addr
	IPv6Prefixes                 []netip.Prefix
	Groups                       []string
	Tags                         map[string]string
}

func eniFromSDK(n types.NetworkInterface) ENI {
	e := ENI{
		ID:            aws.ToString(n.NetworkInterfaceId),
		MAC:           aws.ToString(n.MacAddress),
		SubnetID:      aws.ToString(n.SubnetId),
		Description:   aws.ToString(n.Description),
		Status:        string(n.Status),
		InterfaceType: string(n.InterfaceType),
		Tags:          map[string]string{},
	}
	if a := n.Attachment; a != nil {
		e.AttachmentID = aws.ToString(a.AttachmentId)
		e.AttachmentStatus = string(a.Status)
		e.AttachedTo = aws.ToString(a.InstanceId)
		e.Attached = a.Status == types.AttachmentStatusAttached
		e.DeviceNumber = int(aws.ToInt32(a.DeviceIndex))
		e.NetworkCard = int(aws.ToInt32(a.NetworkCardIndex))
		e.DeleteOnTermination = aws.ToBool(a.DeleteOnTermination)
	}
	for _, p := range n.PrivateIpAddresses {
		ip, err := netip.ParseAddr(aws.ToString(p.PrivateIpAddress))
		if err != nil {
			continue
		}
		if aws.ToBool(p.Primary) {
			e.PrimaryIP = ip
		} else {
			e.SecondaryIPs = append(e.SecondaryIPs, ip)
		}
	}
	for _, p := range n.Ipv4Prefixes {
		if pfx, err := netip.ParsePrefix(aws.ToString(p.Ipv4Prefix)); err == nil {
			e.Prefixes = append(e.Prefixes, pfx)
		}
	}
	for _, a := range n.Ipv6Addresses {
		if ip, err := netip.ParseAddr(aws.ToString(a.Ipv6Address)); err == nil {
			e.IPv6Addrs = append(e.IPv6Addrs, ip)
		}
	}
	for _, p := range n.Ipv6Prefixes {
		if pfx, err := netip.ParsePrefix(aws.ToString(p.Ipv6Prefix)); err == nil {
			e.IPv6Prefixes = append(e.IPv6Prefixes, pfx)
		}
	}
	for _, g := range n.Groups {
		e.Groups = append(e.Groups, aws.ToString(g.GroupId))
	}
	for _, t := range n.TagSet {
		e.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return e
}

// DescribeENIs returns EC2's view of the given ENIs. An ID EC2 does not know
// is an error wrapping ErrNotFound.
func (c *Client) DescribeENIs(ctx context.Context, ids []string) ([]ENI, error) {
	if len(ids) == 0 {
		return nil, nil // an empty list would describe every ENI in the region
	}
	if c.opts.IMDSOnly {
		return c.imdsDescribe(ctx, ids)
	}
	return c.describeENIs(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: ids})
}

// InstanceENIs returns every ENI EC2 shows attached (or attaching) to this
// instance; in IMDS-only mode, what IMDS shows attached.
func (c *Client) InstanceENIs(ctx context.Context) ([]ENI, error) {
	if c.opts.IMDSOnly {
		return c.imdsENIs(ctx)
	}
	return c.describeENIs(ctx, &ec2.DescribeNetworkInterfacesInput{
		Filters:    []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{c.Identity.InstanceID}}},
		MaxResults: aws.Int32(1000),
	})
}

// describeENIs runs DescribeNetworkInterfaces through every page.
func (c *Client) describeENIs(ctx context.Context, in *ec2.DescribeNetworkInterfacesInput) ([]ENI, error) {
	var out []ENI
	p := ec2.NewDescribeNetworkInterfacesPaginator(c.ec2, in)
	for p.HasMorePages() {
		page, err := ec2Call(ctx, "DescribeNetworkInterfaces", func(ctx context.Context) (*ec2.DescribeNetworkInterfacesOutput, error) {
			return p.NextPage(ctx)
		})
		if err != nil {
			return nil, err
		}
		for _, n := range page.NetworkInterfaces {
			out = append(out, eniFromSDK(n))
		}
	}
	return out, nil
}

// AllocOptions say how to build a new ENI.
type AllocOptions struct {
	// SubnetID, when set, is the one subnet to use (custom networking; it
	// must be in the instance's VPC and AZ, else ErrPlacement); empty chooses as
	// upstream does (see ChooseENISubnets).
	SubnetID       string
	SecurityGroups []string // empty: the primary ENI's groups
	IPs            int      // secondary IPs to create it with
	Prefixes       int      // or /28 prefixes (prefix delegation)
	// SubnetDiscovery (ENABLE_SUBNET_DISCOVERY) lets the ENI go in other
	// subnets of the VPC and AZ tagged kubernetes.io/role/cni.
	SubnetDiscovery bool
	// NetworkCard is the network card to attach the ENI on (0, the
	// default, is the instance's default card).
	NetworkCard int
}

// AllocENI creates an ENI with upstream's description and tags, attaches it
// on network card o.NetworkCard at the first free device index of that
// card (device indexes are per card in EC2), and sets
// DeleteOnTermination. On a failure after creation it deletes what it made.
// The returned ENI may still be attaching: see WaitAttached.
func (c *Client) AllocENI(ctx context.Context, o AllocOptions) (ENI, error) {
	if len(o.SecurityGroups) == 0 {
		// IMDS has the primary ENI's groups (sorted); no EC2 call.
		groups, err := c.PrimarySecurityGroups(ctx)
		if err != nil {
			return ENI{}, fmt.Errorf("read the primary ENI's security groups: %w", err)
		}
		o.SecurityGroups = groups
	}
	subnets := []string{o.SubnetID}
	if o.SubnetID != "" {
		err := c.checkNamedSubnet(ctx, o.SubnetID)
		c.noteCandidates(subnets, err)
		if err != nil {
			return ENI{}, err
		}
	} else {
		var err error
		subnets, err = c.eniSubnets(ctx, o.SubnetDiscovery)
		c.noteCandidates(subnets, err)
		if err != nil {
			return ENI{}, err
		}
	}
	if o.NetworkCard < 0 {
		return ENI{}, fmt.Errorf("network card %d: cards start at 0", o.NetworkCard)
	}
	dev, err := c.freeDeviceIndex(ctx, o.NetworkCard)
	if err != nil {
		return ENI{}, err
	}
	created, err := c.createENI(ctx, subnets, o)
	if err != nil {
		return ENI{}, err
	}
	eni := eniFromSDK(*created.NetworkInterface)
	att, err := retryThrottledStep(ctx, func(ctx context.Context) (*ec2.AttachNetworkInterfaceOutput, error) {
		return ec2Call(ctx, "AttachNetworkInterface", func(ctx context.Context) (*ec2.AttachNetworkInterfaceOutput, error) {
			return c.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
				DeviceIndex:        aws.Int32(int32(dev)),
				InstanceId:         aws.String(c.Identity.InstanceID),
				NetworkInterfaceId: aws.String(eni.ID),
				NetworkCardIndex:   aws.Int32(int32(o.NetworkCard)),
			})
		})
	})
	if err != nil {
		c.deleteENI(ctx, eni.ID)
		return ENI{}, err
	}
	eni.AttachmentID = aws.ToString(att.AttachmentId)
	eni.DeviceNumber, eni.NetworkCard = dev, o.NetworkCard
	_, err = retryThrottledStep(ctx, func(ctx context.Context) (*ec2.ModifyNetworkInterfaceAttributeOutput, error) {
		return ec2Call(ctx, "ModifyNetworkInterfaceAttribute", func(ctx context.Context) (*ec2.ModifyNetworkInterfaceAttributeOutput, error) {
			return c.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
				NetworkInterfaceId: aws.String(eni.ID),
				Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: att.AttachmentId, DeleteOnTermination: aws.Bool(true)},
			})
		})
	})
	if err != nil {
		if ferr := c.FreeENI(ctx, eni.ID); ferr != nil {
			CountUtilsError(FnENICleanupUponModifyNetworkErr, ferr)
			c.log.Error("could not clean up ENI after failing to set DeleteOnTermination", "eni", eni.ID, "error", ferr)
		}
		return ENI{}, err
	}
	eni.DeleteOnTermination = true
	c.created.add(eni)
	c.log.Info("allocated ENI", "eni", eni.ID, "card", o.NetworkCard, "device", dev, "ips", len(eni.SecondaryIPs), "prefixes", len(eni.Prefixes))
	return eni, nil
}

// createENI tries CreateNetworkInterface in each subnet in turn until one
// succeeds, as upstream does: a subnet that is full (or fails otherwise)
// moves on to the next. The last error is returned when all fail, so an
// exhausted last subnet still reads as ErrSubnetExhausted.
func (c *Client) createENI(ctx context.Context, subnets []string, o AllocOptions) (*ec2.CreateNetworkInterfaceOutput, error) {
	var lastErr error
	for _, subnet := range subnets {
		in := &ec2.CreateNetworkInterfaceInput{
			// The token makes the SDK's retries of a lost answer idempotent:
			// EC2 returns the ENI it made instead of making a second one. A
			// new subnet is a new request, so it gets a new token.
			ClientToken: aws.String(clientToken()),
			SubnetId:    aws.String(subnet),
			Description: aws.String(ENIDescriptionPrefix + c.Identity.InstanceID),
			Groups:      o.SecurityGroups,
			TagSpecifications: []types.TagSpecification{{
				ResourceType: types.ResourceTypeNetworkInterface,
				Tags:         c.newENITags(),
			}},
		}
		switch {
		case o.Prefixes > 0:
			in.Ipv4PrefixCount = aws.Int32(int32(o.Prefixes))
		case o.IPs > 0:
			in.SecondaryPrivateIpAddressCount = aws.Int32(int32(o.IPs))
		}
		out, err := ec2Call(ctx, "CreateNetworkInterface", func(ctx context.Context) (*ec2.CreateNetworkInterfaceOutput, error) {
			return c.ec2.CreateNetworkInterface(ctx, in)
		})
		if err == nil {
			return out, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
		if len(subnets) > 1 {
			c.log.Warn("could not create an ENI in this subnet; trying the next", "subnet", subnet, "error", err)
		}
	}
	return nil, lastErr
}

// freeDeviceIndex asks EC2 which device indexes of the card are taken and
// returns the lowest free one: from 1 on card 0 (device 0 is the
// primary's), from 0 on the others.
func (c *Client) freeDeviceIndex(ctx context.Context, card int) (int, error) {
	out, err := ec2Call(ctx, "DescribeInstances", func(ctx context.Context) (*ec2.DescribeInstancesOutput, error) {
		return c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{c.Identity.InstanceID}})
	})
	if err != nil {
		return 0, err
	}
	used := make([]bool, maxDeviceIndex)
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			for _, n := range inst.NetworkInterfaces {
				if a := n.Attachment; a != nil && int(aws.ToInt32(a.NetworkCardIndex)) == card {
					if d := int(aws.ToInt32(a.DeviceIndex)); d >= 0 && d < maxDeviceIndex {
						used[d] = true
					}
				}
			}
		}
	}
	first := 0
	if card == 0 {
		first = 1
	}
	for d := first; d < maxDeviceIndex; d++ {
		if !used[d] {
			return d, nil
		}
	}
	return 0, fmt.Errorf("no free device index on network card %d: %w", card, ErrENILimit)
}

// FreeENI detaches and deletes an ENI; an ENI that is already gone is not
// an error. After the detach it watches IMDS until the instance no longer
// shows the ENI (free, and outside EC2's request limits) and only then
// deletes it: a delete sent while the ENI is still detaching is refused,
// and polling with deletes would spend the account's mutating-request
// tokens, which a fleet scaling down at once is short of.
func (c *Client) FreeENI(ctx context.Context, eniID string) error {
	enis, err := c.DescribeENIs(ctx, []string{eniID})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		CountUtilsError(FnGetENIAttachmentIDFailed, err)
		return fmt.Errorf("free %s: %w", eniID, err)
	}
	if len(enis) == 1 && enis[0].AttachmentID != "" {
		_, err := ec2Call(ctx, "DetachNetworkInterface", func(ctx context.Context) (*ec2.DetachNetworkInterfaceOutput, error) {
			return c.ec2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(enis[0].AttachmentID)})
		})
		if err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("free %s: %w", eniID, err)
		}
		if enis[0].MAC != "" {
			c.watchIMDSDetached(ctx, enis[0].MAC)
		}
	}
	delay := time.Second
	for try := 0; ; try++ {
		err := c.DeleteENI(ctx, eniID)
		if err == nil {
			c.log.Info("freed ENI", "eni", eniID)
			return nil
		}
		// Still detaching: EC2 says the ENI is in use. Any other error
		// (already retried by the SDK) will not go away by waiting.
		if !errors.Is(err, ErrENIInUse) || try >= 8 {
			CountUtilsError(FnFreeENIDeleteErr, err)
			return fmt.Errorf("free %s: %w", eniID, err)
		}
		if err := ctxtime.Sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// watchIMDSDetached waits, at most a minute, until IMDS no longer lists
// the MAC; whatever IMDS says, the delete that follows decides.
func (c *Client) watchIMDSDetached(ctx context.Context, mac string) {
	deadline := time.Now().Add(time.Minute)
	delay := 200 * time.Millisecond
	for time.Now().Before(deadline) {
		macs, err := c.get(ctx, "network/interfaces/macs")
		if err == nil && !listsMAC(macs, mac) {
			return
		}
		if ctxtime.Sleep(ctx, delay) != nil {
			return
		}
		delay = min(2*delay, 2*time.Second)
	}
}

func (c *Client) deleteENI(ctx context.Context, id string) {
	_, err := ec2Call(ctx, "DeleteNetworkInterface", func(ctx context.Context) (*ec2.DeleteNetworkInterfaceOutput, error) {
		return c.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
	})
	if err != nil {
		CountUtilsError(FnAllocENIDeleteErr, err)
		c.log.Error("could not delete ENI after failed attach; the leaked-ENI sweep deletes it later unless DISABLE_LEAKED_ENI_CLEANUP is set", "eni", id, "error", err)
	}
}

// clientToken returns a fresh idempotency token.
func clientToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
