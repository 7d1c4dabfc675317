package pool

import (
	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
)

// ENIRules are the settings that decide which attached ENIs are ipamd's.
// The zero value is upstream's default.
type ENIRules struct {
	// IgnoreUntagged is MANAGE_UNTAGGED_ENI=false: an ENI without this
	// instance's node.k8s.amazonaws.com/instance_id tag is left alone.
	IgnoreUntagged bool
	// TagsUnknown: the ENI list came from IMDS (ENABLE_IMDS_ONLY_MODE),
	// which shows no tags. As upstream, nothing is then marked unmanaged
	// by its tags.
	TagsUnknown bool
}

// IsManaged applies upstream's rule to one attached ENI: the primary ENI
// always; an ENI tagged no_manage=true never, one whose no_manage tag has
// any other value always; one tagged with this instance's ID always;
// otherwise (no instance tag, or another instance's) only when untagged
// ENIs are managed (MANAGE_UNTAGGED_ENI, default true). An EFA-only ENI
// (InterfaceType "efa-only", no IP addresses) is never managed. An EFA ENI
// ("efa") and a trunk ENI follow the same rules, as upstream: a managed
// one joins the datastore as EFA (IsEFA: never freed) or as the trunk
// (IsTrunk).
func IsManaged(e awsutils.ENI, id awsutils.Identity, r ENIRules) bool {
	if e.ID == id.PrimaryENIID {
		return true
	}
	if IsEFAOnly(e) {
		return false
	}
	if r.TagsUnknown {
		return true
	}
	if v, ok := e.Tags[awsutils.TagNoManage]; ok {
		return v != "true"
	}
	if owner, ok := e.Tags[awsutils.TagInstanceID]; ok && owner == id.InstanceID {
		return true
	}
	return !r.IgnoreUntagged
}

// IsTrunk: the ENI is the trunk of security groups for pods (EC2's
// InterfaceType "trunk"). The trunk is ipamd's to set up (its link, like a
// secondary ENI's, without the rule from its primary IP) and to show, but
// never to grow onto, hand addresses from, tag, free or detach: the VPC
// resource controller owns it.
func IsTrunk(e awsutils.ENI) bool { return e.InterfaceType == awsutils.InterfaceTypeTrunk }

// EC2's InterfaceType of EFA ENIs: "efa" has IP addresses and an EFA
// device, "efa-only" the EFA device alone.
const (
	InterfaceTypeEFA     = "efa"
	InterfaceTypeEFAOnly = "efa-only"
)

// IsEFA: the ENI is an EFA ENI with addresses. As upstream, a managed one
// gives pods addresses like any ENI but is never freed.
func IsEFA(e awsutils.ENI) bool { return e.InterfaceType == InterfaceTypeEFA }

// IsEFAOnly: the ENI carries an EFA device and no IP address; ipamd never
// manages it, and, alone on a network card, it leaves that card unmanaged.
func IsEFAOnly(e awsutils.ENI) bool { return e.InterfaceType == InterfaceTypeEFAOnly }

// PodENIs is how many ENIs may give pods addresses: the ENI limit less the
// attached ENIs ipamd leaves alone, less the primary ENI under custom
// networking, less the trunk's slot when a trunk is wanted (TrunkWanted;
// held for it before it is attached, and taken by it after). Node init and
// the pool manager both size the pool with it.
func PodENIs(maxENIs, unmanaged int, customNetworking, trunk bool) int {
	n := maxENIs - unmanaged
	if customNetworking {
		n--
	}
	if trunk {
		n--
	}
	return max(n, 0)
}

// CountUnmanaged counts the ENIs attached on network card 0 that ipamd
// leaves alone. They take ENI slots ipamd cannot use, so, as upstream,
// they come off the node's ENI limit (awscni_eni_max = limit - unmanaged).
func CountUnmanaged(enis []awsutils.ENI, id awsutils.Identity, r ENIRules) int {
	return CountUnmanagedOnCard(enis, id, r, 0)
}

// CountUnmanagedOnCard is CountUnmanaged for network card card: they come
// off that card's ENI limit.
func CountUnmanagedOnCard(enis []awsutils.ENI, id awsutils.Identity, r ENIRules, card int) int {
	n := 0
	for _, e := range enis {
		if e.Attached && e.NetworkCard == card && !IsManaged(e, id, r) {
			n++
		}
	}
	return n
}

// MaxAddresses is the most addresses enis ENIs can give pods: slotsPerENI
// secondary IPs each, or slotsPerENI /28 prefixes of 16 addresses.
func MaxAddresses(enis, slotsPerENI int, prefixes bool) int {
	n := max(enis, 0) * slotsPerENI
	if prefixes {
		n *= warmpool.AddressesPerPrefix
	}
	return n
}

// maxENIs is how many ENIs ipamd may use now: the limit (MAX_ENI or the
// instance type's) less the attached ENIs it leaves alone.
func (p *Manager) maxENIs() int { return max(p.cfg.MaxENIs-p.unmanaged, 0) }

// setUnmanaged records how many attached ENIs ipamd leaves alone and
// updates what depends on it: the ENI and address limits and their gauges.
func (p *Manager) setUnmanaged(n int) {
	if n != p.unmanaged {
		p.Log.Info("ENIs left alone changed; ENI limit adjusted", "unmanaged", n, "was", p.unmanaged,
			"maxENIs", max(p.cfg.MaxENIs-n, 0))
	}
	p.unmanaged = n
	p.cfg.Targets.MaxAddresses = MaxAddresses(p.podENIs(), p.cfg.SlotsPerENI, p.cfg.Targets.PrefixDelegation)
	p.exportLimits()
	p.publishLimits()
}

// exportLimits sets upstream's awscni_eni_max (ENIs ipamd may use) and
// awscni_ip_max (the addresses they can give pods: 16 per prefix slot with
// prefix delegation, none on the primary ENI under custom networking).
func (p *Manager) exportLimits() {
	p.m.eniMax.Set(float64(p.maxENIs()))
	p.m.ipMax.Set(float64(MaxAddresses(p.podENIs(), p.cfg.SlotsPerENI, p.cfg.Targets.PrefixDelegation)))
}
