package awsutils

import (
	"errors"
	"sort"
	"strings"
)

// Subnet tags upstream reads to place new ENIs (ENABLE_SUBNET_DISCOVERY).
const (
	// TagSubnetCNIRole marks a subnet for pod ENIs; the value "0" excludes it.
	TagSubnetCNIRole = "kubernetes.io/role/cni"
	// TagSubnetClusterPrefix + CLUSTER_NAME scopes a tagged subnet to
	// clusters: once a subnet has any such tag, only those clusters use it.
	TagSubnetClusterPrefix = "cni.networking.k8s.aws/cluster/"
)

var (
	// ErrSubnetExcluded: the primary subnet is tagged kubernetes.io/role/cni=0
	// (or scoped to other clusters) and no other subnet may be used.
	ErrSubnetExcluded = errors.New("subnet excluded from pod ENIs by its tags")
	// ErrNoUsableSubnet: subnet discovery found no subnet a new ENI may go in.
	ErrNoUsableSubnet = errors.New("no subnet may hold a new ENI")
)

// Subnet is one subnet as DescribeSubnets reports it.
type Subnet struct {
	ID           string
	VPCID        string
	AZ           string
	CIDR         string // IPv4 CIDR block
	AvailableIPs int
	Tags         map[string]string
}

// SubnetExcluded reports whether a subnet's tags keep pod ENIs out of it:
// kubernetes.io/role/cni=0, or a cni role tag with cluster tags none of
// which names this cluster. A subnet without the role tag is not excluded.
func SubnetExcluded(tags map[string]string, cluster string) bool {
	role, tagged := tags[TagSubnetCNIRole]
	if !tagged {
		return false
	}
	return role == "0" || !clusterMayUse(tags, cluster)
}

// clusterMayUse: no cluster name, no cluster tags, or this cluster's tag.
func clusterMayUse(tags map[string]string, cluster string) bool {
	if cluster == "" {
		return true
	}
	if _, ok := tags[TagSubnetClusterPrefix+cluster]; ok {
		return true
	}
	for k := range tags {
		if strings.HasPrefix(k, TagSubnetClusterPrefix) {
			return false
		}
	}
	return true
}

// SubnetQuery is what ChooseENISubnets decides from.
type SubnetQuery struct {
	Discovery bool   // ENABLE_SUBNET_DISCOVERY
	PrimaryID string // the primary ENI's subnet
	Cluster   string // CLUSTER_NAME
	// Listing is DescribeSubnets for the instance's VPC and AZ; Listed is
	// false when that call failed.
	Listing []Subnet
	Listed  bool
	// Primary is the primary subnet as EC2 describes it, nil when unknown
	// (the exclusion check failed, or it was not asked).
	Primary *Subnet
}

// ChooseENISubnets returns the subnets to try, in order, for a new ENI,
// as upstream chooses them.
//
// With discovery, from the listing sorted by free addresses (most first,
// ties in listing order): never a subnet tagged kubernetes.io/role/cni=0;
// a subnet without the role tag only if it is the primary subnet; a
// tagged one if no CLUSTER_NAME is set, or it has no cluster tags, or it
// has this cluster's. If the listing failed, the primary subnet unless it
// is known to be excluded.
//
// Without discovery, the primary subnet unless it is known to be excluded
// (an exclusion check that failed does not stop it).
func ChooseENISubnets(q SubnetQuery) ([]string, error) {
	primaryOnly := func() ([]string, error) {
		if q.Primary != nil && SubnetExcluded(q.Primary.Tags, q.Cluster) {
			return nil, ErrSubnetExcluded
		}
		return []string{q.PrimaryID}, nil
	}
	if !q.Discovery || !q.Listed {
		return primaryOnly()
	}
	list := append([]Subnet(nil), q.Listing...)
	sort.SliceStable(list, func(i, j int) bool { return list[i].AvailableIPs > list[j].AvailableIPs })
	var out []string
	for _, s := range list {
		_, tagged := s.Tags[TagSubnetCNIRole]
		switch {
		case SubnetExcluded(s.Tags, q.Cluster):
		case !tagged && s.ID != q.PrimaryID:
		default:
			out = append(out, s.ID)
		}
	}
	if len(out) == 0 {
		return nil, ErrNoUsableSubnet
	}
	return out, nil
}
