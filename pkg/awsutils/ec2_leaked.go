package awsutils

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// DetachedTaggedENIs lists the detached (status available) ENIs of the
// VPC that carry the instance_id tag ipamd puts on the ENIs it creates,
// and, when CLUSTER_NAME is set, this cluster's tag: the candidates of the
// leaked-ENI sweep. It reads every page (MaxResults 1000), as upstream.
func (c *Client) DetachedTaggedENIs(ctx context.Context) ([]ENI, error) {
	filters := []types.Filter{
		{Name: aws.String("tag-key"), Values: []string{TagInstanceID}},
		{Name: aws.String("status"), Values: []string{string(types.NetworkInterfaceStatusAvailable)}},
		{Name: aws.String("vpc-id"), Values: []string{c.Identity.VPCID}},
	}
	if c.opts.ClusterName != "" {
		filters = append(filters, types.Filter{Name: aws.String("tag:" + TagCluster), Values: []string{c.opts.ClusterName}})
	}
	return c.describeENIs(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: filters, MaxResults: aws.Int32(1000)})
}

// DeleteENI deletes a detached ENI. One that is already gone is not an
// error; one that is attached fails with ErrENIInUse.
func (c *Client) DeleteENI(ctx context.Context, eniID string) error {
	_, err := ec2Call(ctx, "DeleteNetworkInterface", func(ctx context.Context) (*ec2.DeleteNetworkInterfaceOutput, error) {
		return c.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eniID)})
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete %s: %w", eniID, err)
	}
	return nil
}
