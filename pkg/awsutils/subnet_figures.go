package awsutils

import (
	"errors"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/subnetfigures"
)

// SubnetFigures are the free-address counts of the subnets the node uses,
// from the DescribeSubnets answers this client receives (it never makes a
// call for them), and the subnets its last choice for a new ENI allowed.
// The agent tells them which subnets its ENIs are in (TrackENIs).
func (c *Client) SubnetFigures() *subnetfigures.Figures { return c.figures }

// recordSubnets keeps what one DescribeSubnets answer said.
func (c *Client) recordSubnets(subnets ...Subnet) {
	answers := make([]subnetfigures.Answer, 0, len(subnets))
	for _, s := range subnets {
		answers = append(answers, subnetfigures.Answer{ID: s.ID, CIDR: s.CIDR, AZ: s.AZ, Free: s.AvailableIPs})
	}
	c.figures.Record(answers...)
}

// noteCandidates keeps the outcome of a subnet choice for a new ENI: the
// subnets it allowed, or none when its answer was that no subnet may take
// one. A choice that could not be made (EC2 unreachable) changes nothing.
func (c *Client) noteCandidates(subnets []string, err error) {
	switch {
	case err == nil:
		c.figures.SetCandidates(subnets)
	case errors.Is(err, ErrSubnetExcluded), errors.Is(err, ErrNoUsableSubnet), errors.Is(err, ErrPlacement):
		c.figures.SetCandidates(nil)
	}
}
