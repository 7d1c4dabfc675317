package networkutils

import (
	"net/netip"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

// Values of Config.RandomizeSNAT (AWS_VPC_K8S_CNI_RANDOMIZESNAT).
const (
	RandomizeSNATPRNG       = "prng"       // --random-fully, or --random if iptables lacks it
	RandomizeSNATHashRandom = "hashrandom" // --random
	RandomizeSNATNone       = "none"       // neither
)

// Upstream defaults.
const (
	DefaultConnmark   uint32 = 0x80
	DefaultMTU               = 9001
	MinMTU                   = 576 // IPv4; the ceiling is DefaultMTU
	DefaultVethPrefix        = "eni"
)

// Environment variables read by LoadEnv.
const (
	envExternalSNAT         = "AWS_VPC_K8S_CNI_EXTERNALSNAT"
	envExcludeSNATCIDRs     = "AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS"
	envRandomizeSNAT        = "AWS_VPC_K8S_CNI_RANDOMIZESNAT"
	envNodePortSupport      = "AWS_VPC_CNI_NODE_PORT_SUPPORT"
	envConnmark             = "AWS_VPC_K8S_CNI_CONNMARK"
	envMTU                  = "AWS_VPC_ENI_MTU"
	envVethPrefix           = "AWS_VPC_K8S_CNI_VETHPREFIX"
	envExternalServiceCIDRs = "AWS_EXTERNAL_SERVICE_CIDRS"
	envV6Egress             = "ENABLE_V6_EGRESS"
)

// Config is what the host network setup needs. PrimaryMAC, PrimaryIP and
// VPCCIDRs come from instance metadata, IPv6 from ipamd (which reads
// ENABLE_IPv6, as upstream hands the cluster family to its networkutils);
// the rest from the environment (LoadEnv).
type Config struct {
	PrimaryMAC string         // MAC of the primary ENI; its link is found by it
	PrimaryIP  netip.Addr     // primary IPv4 of the node, the SNAT source (its IPv6 address in IPv6 mode: unused there)
	VPCCIDRs   []netip.Prefix // IPv4 CIDRs of the VPC, never SNATed (IPv6 entries ignored)

	// IPv6 is the cluster's family (ENABLE_IPv6=true): the fwmark rule is
	// an IPv6 rule, no SNAT or connmark rule is programmed (the egress
	// plugin SNATs pods' IPv4 egress itself), and NEW forwarded connections
	// to the pods' IPv4 egress range 169.254.172.0/22 are rejected.
	IPv6 bool
	// V6Egress is ENABLE_V6_EGRESS in an IPv4 cluster: NEW forwarded
	// connections to the pods' IPv6 egress range fd00::ac:0/118 are
	// rejected (ip6tables). Ignored in IPv6 mode.
	V6Egress bool

	// PodENI is ENABLE_POD_ENI and PodSGStrict POD_SECURITY_GROUP_ENFORCING_MODE
	// = strict (ipamd reads both). Together they move the local-table rule
	// from priority 0 to 20, so the plugin's priority-10 VLAN rules win
	// (local_rules.go).
	PodENI      bool
	PodSGStrict bool

	ExternalSNAT         bool           // AWS_VPC_K8S_CNI_EXTERNALSNAT
	ExcludeSNATCIDRs     []netip.Prefix // AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS
	RandomizeSNAT        string         // AWS_VPC_K8S_CNI_RANDOMIZESNAT: prng, hashrandom or none
	NodePortSupport      bool           // AWS_VPC_CNI_NODE_PORT_SUPPORT
	ConnmarkMark         uint32         // AWS_VPC_K8S_CNI_CONNMARK
	MTU                  int            // AWS_VPC_ENI_MTU, for primary and secondary ENIs
	VethPrefix           string         // AWS_VPC_K8S_CNI_VETHPREFIX, host-side pod veth prefix
	ExternalServiceCIDRs []netip.Prefix // AWS_EXTERNAL_SERVICE_CIDRS
}

// LoadEnv reads the host-networking environment variables the way
// upstream ipamd does, through env: unset or blank gives the default, an
// unusable value the default with a warning (env.Warn). AWS_VPC_ENI_MTU
// must be within [576, 9001] (the entrypoint refuses others; ipamd alone
// falls back to 9001). CIDR lists are comma-separated; entries that do not
// parse, and IPv6 entries, are warned about and skipped. ENABLE_V6_EGRESS
// is read as upstream's networkutils does (blank is unset). PrimaryMAC,
// PrimaryIP, VPCCIDRs and IPv6 are left empty.
func LoadEnv(env envutil.Env) Config {
	return Config{
		ExternalSNAT:     env.Bool(envExternalSNAT, false),
		ExcludeSNATCIDRs: ipv4Only(env, envExcludeSNATCIDRs),
		RandomizeSNAT: env.OneOf(envRandomizeSNAT, RandomizeSNATPRNG,
			RandomizeSNATPRNG, RandomizeSNATHashRandom, RandomizeSNATNone),
		NodePortSupport: env.Bool(envNodePortSupport, true),
		// Zero would mark nothing, so it is refused like garbage.
		ConnmarkMark:         env.Uint32(envConnmark, DefaultConnmark, 1),
		MTU:                  env.IntIn(envMTU, DefaultMTU, MinMTU, DefaultMTU),
		VethPrefix:           env.String(envVethPrefix, DefaultVethPrefix),
		ExternalServiceCIDRs: ipv4Only(env, envExternalServiceCIDRs),
		V6Egress:             env.Bool(envV6Egress, false),
	}
}

// ipv4Only reads a CIDR list and drops (with a warning) IPv6 entries:
// upstream applies these lists to IPv4 SNAT and rules only.
func ipv4Only(env envutil.Env, name string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range env.Prefixes(name) {
		if !p.Addr().Is4() {
			env.Reject(name, p.String(), envutil.EntrySkipped+" (not IPv4)")
			continue
		}
		out = append(out, p)
	}
	return out
}

// withDefaults fills zero numeric and string fields with upstream
// defaults, so a partly filled Config still programs sane rules.
func (c Config) withDefaults() Config {
	if c.ConnmarkMark == 0 {
		c.ConnmarkMark = DefaultConnmark
	}
	if c.MTU <= 0 {
		c.MTU = DefaultMTU
	}
	if c.VethPrefix == "" {
		c.VethPrefix = DefaultVethPrefix
	}
	switch c.RandomizeSNAT {
	case RandomizeSNATPRNG, RandomizeSNATHashRandom, RandomizeSNATNone:
	default:
		c.RandomizeSNAT = RandomizeSNATPRNG
	}
	return c
}
