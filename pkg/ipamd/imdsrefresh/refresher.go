package imdsrefresh

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/ctxtime"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/jitter"
)

// DefaultInterval is upstream's period for re-reading the VPC's CIDR
// blocks and the primary ENI's security groups from IMDS.
const DefaultInterval = 30 * time.Second

// AWS is what the refresh reads from IMDS and changes in EC2;
// *awsutils.Client satisfies it.
type AWS interface {
	VPCIPv4CIDRs(ctx context.Context) ([]netip.Prefix, error)
	VPCIPv6CIDRs(ctx context.Context) ([]netip.Prefix, error)
	PrimarySecurityGroups(ctx context.Context) ([]string, error)
	SetENISecurityGroups(ctx context.Context, eniID string, groups []string) error
}

var _ AWS = (*awsutils.Client)(nil)

// Store lists the node's ENIs (the datastore).
type Store interface {
	ENISummaries() []datastore.ENISummary
}

// SNAT reprograms the host's SNAT exclusions for the VPC's CIDR blocks.
type SNAT interface {
	UpdateSNATRules(ctx context.Context, vpcCIDRs []netip.Prefix) error
}

// Config tunes the refresh; zero values take upstream's.
type Config struct {
	Interval time.Duration // between refreshes (30 s)
	// IPv6 (ENABLE_IPv6) re-reads the VPC's IPv6 blocks instead of its
	// IPv4 ones; IPv6 mode has no SNAT for pod addresses.
	IPv6 bool
	// SecurityGroups gives the primary ENI's groups to the secondary ENIs;
	// false under custom networking and without network resource
	// provisioning.
	SecurityGroups bool
	Log            *slog.Logger // default: discard
}

// Deps are the refresh's collaborators and the sets it keeps current.
type Deps struct {
	AWS   AWS
	Store Store
	// SNAT is the host's network; nil when ipamd does not manage it.
	SNAT SNAT
	// IPv4CIDRs and IPv6CIDRs are the VPC's blocks, seeded at node init;
	// only the cluster's family is refreshed.
	IPv4CIDRs, IPv6CIDRs *CIDRSet
	// Errors is upstream's awscni_ipamd_error_count.
	Errors *prometheus.CounterVec
}

// Refresher runs the refresh. Its refreshes run one at a time: at start
// (the security groups, from the agent) and then from Run.
type Refresher struct {
	cfg Config
	Deps
	// appliedSGs are the primary ENI's security groups as last given to
	// every secondary ENI.
	appliedSGs []string
	// known are the groups each ENI is known to carry, sorted (SeedGroups,
	// or given by a refresh).
	known map[string][]string
	// snatStale: the last SNAT update for the VPC's blocks failed, so the
	// host's exclusions lag the known blocks (RefreshVPCCIDRs, from Run's
	// one goroutine).
	snatStale bool
}

// New returns a refresher; Run drives it, Pass runs one refresh.
func New(cfg Config, deps Deps) *Refresher {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Refresher{cfg: cfg, Deps: deps}
}

// Run refreshes every interval until ctx ends. The first pass comes at a
// random point of the first interval, so that nodes started together do
// not read IMDS, and act on a change, in step.
func (r *Refresher) Run(ctx context.Context) {
	if err := ctxtime.Sleep(ctx, jitter.Offset(r.cfg.Interval)); err != nil {
		return
	}
	r.Pass(ctx)
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Pass(ctx)
		}
	}
}

// Pass re-reads the VPC's CIDR blocks, then the primary ENI's security
// groups, and applies what changed.
func (r *Refresher) Pass(ctx context.Context) {
	r.RefreshVPCCIDRs(ctx)
	r.RefreshSecurityGroups(ctx)
}
