package ipamcheck

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/subnetfigures"
)

// orderSubnets puts the subnets of ipamd's ENIs first, in the order of
// their lowest ENI device number (the primary ENI's subnet first), then
// the candidates for new ENIs that hold none, by ID.
func orderSubnets(subnets []subnetfigures.SubnetFree, enis datastore.ENIInfos) []subnetfigures.SubnetFree {
	out := slices.Clone(subnets)
	lowest := func(s subnetfigures.SubnetFree) int {
		if len(s.ENIs) == 0 {
			return 1 << 31 // a candidate only: last
		}
		low := 1 << 30 // ENIs /v1/enis did not list (they changed between reads): after the listed
		for _, id := range s.ENIs {
			if e, ok := enis.ENIs[id]; ok {
				low = min(low, e.DeviceNumber)
			}
		}
		return low
	}
	slices.SortStableFunc(out, func(a, b subnetfigures.SubnetFree) int {
		return cmp.Or(cmp.Compare(lowest(a), lowest(b)), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// subnetsText is the summary's part on the subnets of the node's ENIs:
// each with EC2's free count and how old that answer was at the check.
// Empty when ipamd serves no /v1/subnets (an older build) or names no
// subnet with an ENI.
func subnetsText(r Report) string {
	var parts []string
	for _, s := range r.Subnets {
		if len(s.ENIs) == 0 {
			continue
		}
		if !s.Answered {
			parts = append(parts, s.ID+" free unknown (no DescribeSubnets answer yet)")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d free (%s ago)", s.ID, s.Free, compactAge(max(r.CheckedAt.Sub(s.AsOf), time.Duration(0)))))
	}
	if len(parts) == 0 {
		return ""
	}
	what := "ENI subnet"
	if len(parts) > 1 {
		what += "s"
	}
	return "; " + what + " " + strings.Join(parts, ", ")
}
