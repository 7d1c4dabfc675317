package nodeinit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/vpc"
)

// DefaultMaxPodsFile is where the image ships upstream's max-pods table.
const DefaultMaxPodsFile = "/app/eni-max-pods.txt"

// Limits are the instance's networking limits as ipamd uses them.
type Limits struct {
	ENIs, IPv4PerENI int
	PDSupported      bool // the instance type takes /28 prefixes
	// CardENIs is each network card's ENI limit by card index (card 0's
	// is ENIs); its length is the instance's number of network cards.
	CardENIs []int
}

// LimitsSource is EC2's DescribeInstanceTypes; *awsutils.Client
// satisfies it.
type LimitsSource interface {
	DescribeInstanceTypeLimits(ctx context.Context, instanceType string) (awsutils.TypeLimits, error)
}

// InstanceLimits reads the checked-in table, falling back to EC2's
// DescribeInstanceTypes for types the table does not know.
func InstanceLimits(ctx context.Context, aws LimitsSource, instanceType string) (Limits, error) {
	if l, ok := vpc.Lookup(instanceType); ok {
		return Limits{ENIs: l.ENIs, IPv4PerENI: l.IPv4PerENI, PDSupported: l.PrefixDelegationSupported(),
			CardENIs: cardENIs(l.NetworkCards, l.ENIs)}, nil
	}
	l, err := aws.DescribeInstanceTypeLimits(ctx, instanceType)
	if err != nil {
		return Limits{}, fmt.Errorf("limits of %s: not in the table and EC2 said: %w", instanceType, err)
	}
	cards := l.CardENIs
	if len(cards) == 0 {
		cards = []int{l.ENIs}
	}
	return Limits{ENIs: l.ENIs, IPv4PerENI: l.IPv4PerENI, PDSupported: l.Hypervisor == "nitro" || l.BareMetal, CardENIs: cards}, nil
}

// cardENIs lists the table's per-card ENI limits by card index; a type
// listed without cards has one, of enis.
func cardENIs(cards []vpc.NetworkCard, enis int) []int {
	var out []int
	for _, c := range cards {
		if c.Index < 0 || c.Index >= 1024 {
			continue
		}
		for len(out) <= c.Index {
			out = append(out, 0)
		}
		out[c.Index] = c.MaxENIs
	}
	if len(out) == 0 {
		return []int{enis}
	}
	return out
}

// PrefixDelegation says whether ipamd uses /28 prefixes: as asked
// (ENABLE_PREFIX_DELEGATION) if the instance type takes them. If it does
// not, IPv4 mode falls back to secondary IPs, with a warning, and IPv6
// mode, which cannot (as upstream), fails.
func (l Limits) PrefixDelegation(want, ipv6 bool, instanceType string, log *slog.Logger) (bool, error) {
	if !want || l.PDSupported {
		return want, nil
	}
	if ipv6 {
		return false, fmt.Errorf("ENABLE_IPv6=true needs prefix delegation, which instance type %s does not support (Nitro instances do)",
			instanceType)
	}
	log.Warn("ENABLE_PREFIX_DELEGATION=true but the instance type does not support prefixes; using secondary IPs",
		"instanceType", instanceType)
	return false, nil
}

// maxPods picks the node's pod capacity: the value given (from the node
// object), else the max-pods file for the instance type (lowered for custom
// networking, see customNetworkingMaxPods), else 0 (unknown: no clamp).
func maxPods(cfg Config, instanceType string, limits Limits) int {
	if cfg.MaxPods > 0 {
		return cfg.MaxPods
	}
	path := cfg.MaxPodsFile
	if path == "" {
		path = DefaultMaxPodsFile
	}
	n, err := vpc.MaxPodsFromFile(path, instanceType)
	if err != nil {
		level := cfg.Log.Warn
		if errors.Is(err, fs.ErrNotExist) {
			level = cfg.Log.Info
		}
		level("max pods unknown: pool growth is not clamped", "file", path, "error", err)
		return 0
	}
	if cfg.CustomNetworking {
		c := customNetworkingMaxPods(n, limits.IPv4PerENI)
		cfg.Log.Info("custom networking: the max-pods table's value less the primary ENI's addresses", "table", n, "maxPods", c)
		return c
	}
	return n
}

// customNetworkingMaxPods lowers a max-pods table value (ENIs x (addresses
// per ENI - 1) + 2, the 2 being host-network pods) for custom networking,
// where the primary ENI gives pods none of its addresses: the value AWS's
// max-pods calculator gives with custom networking on. Never below the 2
// host-network pods.
func customNetworkingMaxPods(table, ipv4PerENI int) int {
	return max(table-max(ipv4PerENI-1, 0), 2)
}
