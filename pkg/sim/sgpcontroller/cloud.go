package sgpcontroller

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// EC2API is what the controller calls on EC2.
type EC2API interface {
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeNetworkInterfaces(context.Context, *ec2.DescribeNetworkInterfacesInput, ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error)
	CreateNetworkInterface(context.Context, *ec2.CreateNetworkInterfaceInput, ...func(*ec2.Options)) (*ec2.CreateNetworkInterfaceOutput, error)
	AttachNetworkInterface(context.Context, *ec2.AttachNetworkInterfaceInput, ...func(*ec2.Options)) (*ec2.AttachNetworkInterfaceOutput, error)
	DeleteNetworkInterface(context.Context, *ec2.DeleteNetworkInterfaceInput, ...func(*ec2.Options)) (*ec2.DeleteNetworkInterfaceOutput, error)
	AssociateTrunkInterface(context.Context, *ec2.AssociateTrunkInterfaceInput, ...func(*ec2.Options)) (*ec2.AssociateTrunkInterfaceOutput, error)
	DisassociateTrunkInterface(context.Context, *ec2.DisassociateTrunkInterfaceInput, ...func(*ec2.Options)) (*ec2.DisassociateTrunkInterfaceOutput, error)
}

// subnetInfo is the branch subnet's CIDRs ("" when it has no IPv6 block).
type subnetInfo struct{ v4, v6 string }

func describeSubnet(ctx context.Context, c EC2API, id string) (subnetInfo, error) {
	out, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{id}})
	if err != nil {
		return subnetInfo{}, fmt.Errorf("describe subnet %s: %w", id, err)
	}
	if len(out.Subnets) != 1 {
		return subnetInfo{}, fmt.Errorf("describe subnet %s: %d answers", id, len(out.Subnets))
	}
	sn := out.Subnets[0]
	info := subnetInfo{v4: aws.ToString(sn.CidrBlock)}
	for _, b := range sn.Ipv6CidrBlockAssociationSet {
		info.v6 = aws.ToString(b.Ipv6CidrBlock)
	}
	return info, nil
}

// instanceENIs are the ENIs attached to the instance (in any phase).
func instanceENIs(ctx context.Context, c EC2API, instanceID string) ([]types.NetworkInterface, error) {
	out, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("attachment.instance-id"), Values: []string{instanceID}}}})
	if err != nil {
		return nil, fmt.Errorf("describe the instance's ENIs: %w", err)
	}
	return out.NetworkInterfaces, nil
}

func describeENI(ctx context.Context, c EC2API, id string) (types.NetworkInterface, error) {
	out, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	if err != nil {
		return types.NetworkInterface{}, fmt.Errorf("describe %s: %w", id, err)
	}
	if len(out.NetworkInterfaces) != 1 {
		return types.NetworkInterface{}, fmt.Errorf("describe %s: %d answers", id, len(out.NetworkInterfaces))
	}
	return out.NetworkInterfaces[0], nil
}

// isNotFound reports an EC2 error saying the thing is already gone.
func isNotFound(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "InvalidNetworkInterfaceID.NotFound", "InvalidAssociationID.NotFound":
			return true
		}
	}
	return false
}
