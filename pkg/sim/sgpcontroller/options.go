package sgpcontroller

import (
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/client-go/rest"
)

// Defaults.
const (
	// DefaultBranchCooldown is the real controller's branchENICooldown:
	// how long a deleted pod's branch ENI is kept before it goes.
	DefaultBranchCooldown = 60 * time.Second
	// DefaultBranchLimit is the stand-in's branches per node, advertised
	// as vpc.amazonaws.com/pod-eni: the figure published for m5.large
	// (the e2e suite's instance type). The real controller advertises
	// each instance type's own.
	DefaultBranchLimit = 9
)

// Options configure a Controller.
type Options struct {
	// Kube reaches the API server; it needs CRDs (create, once), CNINodes
	// (get, list, watch, create), nodes and nodes/status (get, patch),
	// pods (list, watch, patch).
	Kube *rest.Config

	// EC2 is the client; when nil one is built for EC2Endpoint, Region
	// and AccessKeyID (an ec2sim Account routes by it; a standalone Sim
	// takes any).
	EC2         EC2API
	EC2Endpoint string
	Region      string // default us-west-2
	AccessKeyID string // default AKIDSGPCONTROLLER
	// HTTPClient carries the built client's requests (nil: the SDK's), e.g.
	// one that dials inside the network namespace the simulator listens in.
	HTTPClient aws.HTTPClient

	NodeName   string // the Node and its CNINode
	InstanceID string // the node's instance
	SubnetID   string // where the trunk and the branches are made

	// SecurityGroups for the trunk and every branch; none: the VPC's
	// default (the simulator's first group).
	SecurityGroups []string
	// IPv6 gives each branch one IPv6 address (the subnet must have an
	// IPv6 block), in ipv6Addr and subnetV6Cidr.
	IPv6 bool

	BranchCooldown time.Duration // 0: DefaultBranchCooldown
	BranchLimit    int           // 0: DefaultBranchLimit

	Logger *slog.Logger // nil: discard
}

func (o *Options) fill() error {
	switch {
	case o.Kube == nil:
		return errors.New("sgpcontroller: Options.Kube is required")
	case o.EC2 == nil && o.EC2Endpoint == "":
		return errors.New("sgpcontroller: Options.EC2 or Options.EC2Endpoint is required")
	case o.NodeName == "" || o.InstanceID == "" || o.SubnetID == "":
		return errors.New("sgpcontroller: NodeName, InstanceID and SubnetID are required")
	}
	if o.Region == "" {
		o.Region = "us-west-2"
	}
	if o.AccessKeyID == "" {
		o.AccessKeyID = "AKIDSGPCONTROLLER"
	}
	if o.BranchCooldown == 0 {
		o.BranchCooldown = DefaultBranchCooldown
	}
	if o.BranchLimit == 0 {
		o.BranchLimit = DefaultBranchLimit
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.EC2 == nil {
		o.EC2 = ec2.New(ec2.Options{
			Region:       o.Region,
			BaseEndpoint: aws.String(o.EC2Endpoint),
			Credentials:  credentials.NewStaticCredentialsProvider(o.AccessKeyID, "sgpcontroller-secret", ""),
			HTTPClient:   o.HTTPClient,
		})
	}
	return nil
}
