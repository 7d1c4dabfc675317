package awsutils

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// Options configure a Client.
type Options struct {
	// HTTPTimeout bounds each HTTP request (HTTP_TIMEOUT; at least 10 s upstream).
	HTTPTimeout time.Duration
	// MaxAttempts and MaxBackoff tune the SDK's standard retryer, which backs
	// off with jitter on throttling (RequestLimitExceeded) and 5xx.
	MaxAttempts int
	MaxBackoff  time.Duration
	// ClusterName (CLUSTER_NAME) adds cluster tags to ENIs it creates.
	ClusterName string
	// AdditionalTags (ADDITIONAL_ENI_TAGS) are added to ENIs it creates.
	AdditionalTags map[string]string
	// Version (VPC_CNI_VERSION) goes into the EC2 user agent.
	Version string
	Logger  *slog.Logger
}

// Client talks to IMDS and EC2 for one instance.
type Client struct {
	ec2  *ec2.Client
	imds *imds.Client
	opts Options
	log  *slog.Logger
	// Identity is read from IMDS once, at New.
	Identity Identity
	subnets  subnetCache
}

// New loads the SDK's default configuration (credentials chain, endpoint
// overrides from the environment), reads the instance identity from IMDS and
// builds the EC2 client for the instance's region.
func New(ctx context.Context, opts Options) (*Client, error) {
	if opts.HTTPTimeout < 10*time.Second {
		opts.HTTPTimeout = 10 * time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 20 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	RegisterMetrics()
	httpClient := awshttp.NewBuildableClient().WithTimeout(opts.HTTPTimeout)
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithHTTPClient(httpClient),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = opts.MaxAttempts
				o.MaxBackoff = opts.MaxBackoff
			})
		}),
		config.WithAppID("amazon-vpc-cni-k8s/"+opts.Version),
	)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	c := &Client{imds: imds.NewFromConfig(cfg), opts: opts, log: opts.Logger}
	id, err := c.readIdentity(ctx)
	if err != nil {
		return nil, err
	}
	c.Identity = id
	cfg.Region = id.Region
	c.ec2 = ec2.NewFromConfig(cfg)
	return c, nil
}

// InstanceIdentity returns what IMDS said about this instance at New.
func (c *Client) InstanceIdentity() Identity { return c.Identity }
