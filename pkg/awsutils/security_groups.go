package awsutils

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// PrimarySecurityGroups reads the primary ENI's security groups from IMDS
// (security-group-ids of the primary MAC), sorted: the groups upstream
// keeps every ENI of the node in, unless custom networking names others.
func (c *Client) PrimarySecurityGroups(ctx context.Context) ([]string, error) {
	s, err := c.get(ctx, "network/interfaces/macs/"+c.Identity.PrimaryMAC+"/security-group-ids")
	if err != nil {
		return nil, err
	}
	groups := strings.Fields(s)
	if len(groups) == 0 {
		return nil, fmt.Errorf("imds security-group-ids of %s: empty", c.Identity.PrimaryMAC)
	}
	sort.Strings(groups)
	return groups, nil
}

// SetENISecurityGroups replaces an ENI's security groups
// (ModifyNetworkInterfaceAttribute with Groups).
func (c *Client) SetENISecurityGroups(ctx context.Context, eniID string, groups []string) error {
	_, err := ec2Call(ctx, "ModifyNetworkInterfaceAttribute", func(ctx context.Context) (*ec2.ModifyNetworkInterfaceAttributeOutput, error) {
		return c.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
			NetworkInterfaceId: aws.String(eniID), Groups: groups})
	})
	return err
}
