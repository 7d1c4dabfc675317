package awsutils

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TypeLimits are an instance type's networking limits from EC2.
type TypeLimits struct {
	// ENIs is the default network card's ENI count (what ipamd may use).
	ENIs       int
	IPv4PerENI int // primary included
	Hypervisor string
	BareMetal  bool
	// CardENIs is each network card's ENI limit, by card index (one
	// entry, ENIs, when EC2 lists no cards).
	CardENIs []int
}

// DescribeInstanceTypeLimits asks EC2 for an instance type's limits.
func (c *Client) DescribeInstanceTypeLimits(ctx context.Context, instanceType string) (TypeLimits, error) {
	out, err := ec2Call(ctx, "DescribeInstanceTypes", func(ctx context.Context) (*ec2.DescribeInstanceTypesOutput, error) {
		return c.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceType(instanceType)}})
	})
	if err != nil {
		return TypeLimits{}, err
	}
	if len(out.InstanceTypes) != 1 || out.InstanceTypes[0].NetworkInfo == nil {
		return TypeLimits{}, fmt.Errorf("DescribeInstanceTypes %s: no network info", instanceType)
	}
	it := out.InstanceTypes[0]
	ni := it.NetworkInfo
	l := TypeLimits{
		ENIs:       int(aws.ToInt32(ni.MaximumNetworkInterfaces)),
		IPv4PerENI: int(aws.ToInt32(ni.Ipv4AddressesPerInterface)),
		Hypervisor: string(it.Hypervisor),
		BareMetal:  aws.ToBool(it.BareMetal),
	}
	def := aws.ToInt32(ni.DefaultNetworkCardIndex)
	for _, card := range ni.NetworkCards {
		idx, max := int(aws.ToInt32(card.NetworkCardIndex)), int(aws.ToInt32(card.MaximumNetworkInterfaces))
		if aws.ToInt32(card.NetworkCardIndex) == def {
			l.ENIs = max
		}
		if idx >= 0 && idx < 1024 {
			for len(l.CardENIs) <= idx {
				l.CardENIs = append(l.CardENIs, 0)
			}
			l.CardENIs[idx] = max
		}
	}
	if len(l.CardENIs) == 0 {
		l.CardENIs = []int{l.ENIs}
	}
	return l, nil
}
