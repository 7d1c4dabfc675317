package ec2sim

import (
	"fmt"
	"maps"
	"sort"
	"time"
)

// DefaultLatencies returns plausible times for EC2 to answer each action
// the simulator implements, for Config.ActionLatency and
// AccountConfig.ActionLatency (a fresh map each call). They are estimates
// of typical in-Region figures, not published numbers: reads take tens of
// milliseconds, address changes a hundred or two, creating an ENI about
// 300 ms. AttachNetworkInterface's figure is the call; the attachment
// completing afterwards is Config.AttachDelay.
func DefaultLatencies() map[string]time.Duration {
	ms := time.Millisecond
	return map[string]time.Duration{
		"DescribeInstances":               50 * ms,
		"DescribeInstanceTypes":           40 * ms,
		"DescribeNetworkInterfaces":       50 * ms,
		"DescribeSubnets":                 40 * ms,
		"DescribeVpcs":                    30 * ms,
		"CreateNetworkInterface":          300 * ms,
		"AttachNetworkInterface":          200 * ms,
		"ModifyNetworkInterfaceAttribute": 100 * ms,
		"DetachNetworkInterface":          150 * ms,
		"DeleteNetworkInterface":          150 * ms,
		"AssignPrivateIpAddresses":        150 * ms,
		"UnassignPrivateIpAddresses":      120 * ms,
		"AssignIpv6Addresses":             150 * ms,
		"UnassignIpv6Addresses":           120 * ms,
		"CreateTags":                      100 * ms,
		// The VPC resource controller's calls for trunks and branches.
		"AssociateTrunkInterface":            150 * ms,
		"DisassociateTrunkInterface":         120 * ms,
		"DescribeTrunkInterfaceAssociations": 50 * ms,
	}
}

// latencies is how long EC2 takes to answer, per action, with a fallback.
type latencies struct {
	base      time.Duration
	perAction map[string]time.Duration // read-only
}

func newLatencies(base time.Duration, perAction map[string]time.Duration) latencies {
	return latencies{base: base, perAction: maps.Clone(perAction)}
}

func (l latencies) of(action string) time.Duration {
	if d, ok := l.perAction[action]; ok {
		return d
	}
	return l.base
}

// checkLatencies rejects negative times and names of actions the
// simulator does not implement (a typo would silently fall back).
func checkLatencies(base time.Duration, perAction map[string]time.Duration) error {
	if base < 0 {
		return fmt.Errorf("latency %v is negative", base)
	}
	names := make([]string, 0, len(perAction))
	for a := range perAction {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		if _, ok := actions[a]; !ok {
			return fmt.Errorf("latency for %q: not an action ec2sim implements (known: %v)", a, Actions())
		}
		if perAction[a] < 0 {
			return fmt.Errorf("latency for %s: %v is negative", a, perAction[a])
		}
	}
	return nil
}
