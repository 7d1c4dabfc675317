package networkutils

import (
	"log/slog"
	"math"
	"net/netip"
	"strconv"
	"strings"
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
	DefaultVethPrefix        = "eni"
)

// Environment variables read by ConfigFromEnv.
const (
	envExternalSNAT         = "AWS_VPC_K8S_CNI_EXTERNALSNAT"
	envExcludeSNATCIDRs     = "AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS"
	envRandomizeSNAT        = "AWS_VPC_K8S_CNI_RANDOMIZESNAT"
	envNodePortSupport      = "AWS_VPC_CNI_NODE_PORT_SUPPORT"
	envConnmark             = "AWS_VPC_K8S_CNI_CONNMARK"
	envMTU                  = "AWS_VPC_ENI_MTU"
	envVethPrefix           = "AWS_VPC_K8S_CNI_VETHPREFIX"
	envExternalServiceCIDRs = "AWS_EXTERNAL_SERVICE_CIDRS"
)

// Config is what the host network setup needs. PrimaryMAC, PrimaryIP and
// VPCCIDRs come from instance metadata; the rest from the environment
// (ConfigFromEnv).
type Config struct {
	PrimaryMAC string         // MAC of the primary ENI; its link is found by it
	PrimaryIP  netip.Addr     // primary IPv4 of the node; the SNAT source
	VPCCIDRs   []netip.Prefix // IPv4 CIDRs of the VPC, never SNATed

	ExternalSNAT         bool           // AWS_VPC_K8S_CNI_EXTERNALSNAT
	ExcludeSNATCIDRs     []netip.Prefix // AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS
	RandomizeSNAT        string         // AWS_VPC_K8S_CNI_RANDOMIZESNAT: prng, hashrandom or none
	NodePortSupport      bool           // AWS_VPC_CNI_NODE_PORT_SUPPORT
	ConnmarkMark         uint32         // AWS_VPC_K8S_CNI_CONNMARK
	MTU                  int            // AWS_VPC_ENI_MTU, for primary and secondary ENIs
	VethPrefix           string         // AWS_VPC_K8S_CNI_VETHPREFIX, host-side pod veth prefix
	ExternalServiceCIDRs []netip.Prefix // AWS_EXTERNAL_SERVICE_CIDRS
}

// ConfigFromEnv reads the host-networking environment variables the way
// upstream ipamd does (os.LookupEnv in production). Booleans: unset, empty
// or unparsable give the default. CIDR lists are comma-separated; entries
// that do not parse, and IPv6 entries, are logged (slog default logger)
// and skipped. PrimaryMAC, PrimaryIP and VPCCIDRs are left empty.
func ConfigFromEnv(lookup func(string) (string, bool)) Config {
	return configFromEnv(lookup, slog.Default())
}

func configFromEnv(lookup func(string) (string, bool), log *slog.Logger) Config {
	return Config{
		ExternalSNAT:         envBool(lookup, envExternalSNAT, false),
		ExcludeSNATCIDRs:     envCIDRs(lookup, envExcludeSNATCIDRs, log),
		RandomizeSNAT:        envRandomize(lookup, log),
		NodePortSupport:      envBool(lookup, envNodePortSupport, true),
		ConnmarkMark:         envMark(lookup, log),
		MTU:                  envMTUValue(lookup, log),
		VethPrefix:           envString(lookup, envVethPrefix, DefaultVethPrefix),
		ExternalServiceCIDRs: envCIDRs(lookup, envExternalServiceCIDRs, log),
	}
}

func envBool(lookup func(string) (string, bool), name string, def bool) bool {
	v, ok := lookup(name)
	if !ok || v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return def
	}
	return b
}

func envString(lookup func(string) (string, bool), name, def string) string {
	if v, ok := lookup(name); ok && v != "" {
		return v
	}
	return def
}

// envCIDRs parses a comma-separated list of IPv4 CIDRs, normalised to
// their network address (as net.ParseCIDR does upstream).
func envCIDRs(lookup func(string) (string, bool), name string, log *slog.Logger) []netip.Prefix {
	v, _ := lookup(name)
	var out []netip.Prefix
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			log.Warn("skipping invalid CIDR", "env", name, "value", s, "error", err)
			continue
		}
		if !p.Addr().Is4() {
			log.Warn("skipping non-IPv4 CIDR", "env", name, "value", s)
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

func envRandomize(lookup func(string) (string, bool), log *slog.Logger) string {
	v, ok := lookup(envRandomizeSNAT)
	switch {
	case !ok || v == "" || v == RandomizeSNATPRNG:
		return RandomizeSNATPRNG
	case v == RandomizeSNATHashRandom || v == RandomizeSNATNone:
		return v
	default:
		log.Warn("unknown SNAT randomisation, using prng", "env", envRandomizeSNAT, "value", v)
		return RandomizeSNATPRNG
	}
}

// envMark parses the mark with base detection (0x80, 0200, 128);
// zero, negative, too large or unparsable give the default.
func envMark(lookup func(string) (string, bool), log *slog.Logger) uint32 {
	v, ok := lookup(envConnmark)
	if !ok || v == "" {
		return DefaultConnmark
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil || n <= 0 || n > math.MaxUint32 {
		log.Warn("invalid connmark, using default", "env", envConnmark, "value", v, "default", DefaultConnmark)
		return DefaultConnmark
	}
	return uint32(n)
}

// envMTUValue parses the ENI MTU; unparsable or non-positive gives 9001.
func envMTUValue(lookup func(string) (string, bool), log *slog.Logger) int {
	v, ok := lookup(envMTU)
	if !ok {
		return DefaultMTU
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		log.Warn("invalid MTU, using default", "env", envMTU, "value", v, "default", DefaultMTU)
		return DefaultMTU
	}
	return n
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
