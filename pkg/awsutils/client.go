package awsutils

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"golang.org/x/time/rate"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/subnetfigures"
)

// DefaultHTTPTimeout is upstream's HTTP_TIMEOUT default.
const DefaultHTTPTimeout = 10 * time.Second

// UserAgentKey names this CNI in the EC2 user agent, as upstream:
// "amazon-vpc-cni-k8s/<VPC_CNI_VERSION>".
const UserAgentKey = "amazon-vpc-cni-k8s"

// Options configure a Client. The zero value behaves as upstream's clients.
type Options struct {
	// HTTPTimeout bounds each HTTP request to EC2 and IMDS (HTTP_TIMEOUT;
	// the environment parser keeps upstream's floor of 10 s). Zero: 10 s.
	HTTPTimeout time.Duration
	// EC2Endpoint (AWS_EC2_ENDPOINT) sends every EC2 request to this URL.
	// It wins over the SDK's AWS_ENDPOINT_URL_EC2. Empty: the SDK's
	// endpoint resolution.
	EC2Endpoint string
	// MaxAttempts and MaxBackoff override the SDK's standard retryer (for
	// tests and tools). Zero keeps upstream's behaviour: EC2 gets the SDK
	// defaults, which honour AWS_MAX_ATTEMPTS and AWS_RETRY_MODE (3
	// attempts, 20 s maximum backoff); IMDS gets a standard retryer of 3
	// attempts with the IMDS client's 1 s maximum backoff.
	MaxAttempts int
	MaxBackoff  time.Duration
	// IMDSOnly (ENABLE_IMDS_ONLY_MODE) takes the instance's ENIs from IMDS
	// only and refuses every EC2 call but the read-only ones other than
	// DescribeNetworkInterfaces (see imdsOnlyGuard).
	IMDSOnly bool
	// IPv6 (ENABLE_IPv6) reads the node's IPv6 address and the VPC's IPv6
	// CIDRs at start; an instance without an IPv6 address is an error.
	IPv6 bool
	// ClusterName (CLUSTER_NAME) adds cluster tags to ENIs it creates.
	ClusterName string
	// AdditionalTags (ADDITIONAL_ENI_TAGS) are added to ENIs it creates.
	AdditionalTags map[string]string
	// Version (VPC_CNI_VERSION) goes into the EC2 user agent.
	Version string
	// Budget (EC2_API_RATE_LIMIT, EC2_API_BURST) limits the node's EC2
	// request attempts; the zero value is the defaults. IMDS is not
	// limited.
	Budget Budget
	Logger *slog.Logger
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
	figures  *subnetfigures.Figures // free addresses per subnet, from the DescribeSubnets answers above
	budget   *rate.Limiter          // every EC2 attempt takes a token
	created  createdENIs            // ENIs AllocENI made, until they are seen attached
	// attachWait bounds WaitAttached's watch of IMDS (0: a minute).
	attachWait time.Duration
}

// New loads the SDK's default configuration (credentials chain, endpoint
// and retry settings from the environment), reads the instance identity
// from IMDS and builds the EC2 client for the instance's region.
func New(ctx context.Context, opts Options) (*Client, error) {
	if opts.HTTPTimeout <= 0 {
		opts.HTTPTimeout = DefaultHTTPTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	RegisterMetrics()
	// One HTTP client for both, as upstream: HTTP_TIMEOUT bounds IMDS
	// requests as well as EC2 ones.
	httpClient := awshttp.NewBuildableClient().WithTimeout(opts.HTTPTimeout)
	cfg, err := config.LoadDefaultConfig(ctx, config.WithHTTPClient(httpClient))
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	c := &Client{imds: imds.NewFromConfig(cfg, opts.imdsOptions), opts: opts, log: opts.Logger, figures: subnetfigures.New(nil)}
	id, err := c.readIdentity(ctx)
	if err != nil {
		return nil, err
	}
	c.Identity = id
	cfg.Region = id.Region
	b := opts.Budget.withDefaults()
	c.budget = rate.NewLimiter(rate.Limit(b.CallsPerSecond), b.Burst)
	c.ec2 = ec2.NewFromConfig(cfg, opts.ec2Options, func(eo *ec2.Options) {
		eo.APIOptions = append(eo.APIOptions, addBudget(c.budget))
	})
	if opts.IMDSOnly {
		c.log.Info("ENABLE_IMDS_ONLY_MODE=true: ENIs and addresses come from IMDS only; EC2 calls that change anything, and DescribeNetworkInterfaces, are refused")
	}
	return c, nil
}

// imdsOptions gives IMDS upstream's standard retryer (3 attempts; IMDS's
// own 1 s maximum backoff) unless the options override it.
func (o Options) imdsOptions(io *imds.Options) {
	io.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		if o.MaxAttempts > 0 {
			so.MaxAttempts = o.MaxAttempts
		}
	})
	if o.MaxBackoff > 0 {
		io.Retryer = retry.AddWithMaxBackoffDelay(io.Retryer, o.MaxBackoff)
		io.DisableDefaultMaxBackoff = true
	}
}

// ec2Options adds upstream's user agent, AWS_EC2_ENDPOINT, the IMDS-only
// guard and any retry override to the EC2 client.
func (o Options) ec2Options(eo *ec2.Options) {
	eo.APIOptions = append(eo.APIOptions, awsmiddleware.AddUserAgentKeyValue(UserAgentKey, o.Version))
	if o.EC2Endpoint != "" {
		eo.BaseEndpoint = aws.String(o.EC2Endpoint)
	}
	if o.IMDSOnly {
		eo.APIOptions = append(eo.APIOptions, addIMDSOnlyGuard)
	}
	if o.MaxAttempts > 0 {
		eo.RetryMaxAttempts = o.MaxAttempts // the SDK wraps the retryer after these options
	}
	if o.MaxBackoff > 0 {
		eo.Retryer = retry.AddWithMaxBackoffDelay(eo.Retryer, o.MaxBackoff)
	}
}

// InstanceIdentity returns what IMDS said about this instance at New.
func (c *Client) InstanceIdentity() Identity { return c.Identity }
