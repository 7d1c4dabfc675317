package main

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

// Defaults of the values rendered into the conflist and of the host paths.
const (
	defaultVethPrefix     = "eni"
	defaultMTU            = 9001
	defaultPodSGMode      = "strict"
	defaultPluginLogFile  = "/var/log/aws-routed-eni/plugin.log"
	defaultPluginLogLevel = "Debug"
	// The egress plugin's log: its IPv4 egress in an IPv6 cluster, its
	// IPv6 egress in an IPv4 cluster.
	defaultEgressV4PluginLogFile = "/var/log/aws-routed-eni/egress-v4-plugin.log"
	defaultEgressV6PluginLogFile = "/var/log/aws-routed-eni/egress-v6-plugin.log"
	defaultRandomizeSNAT         = "prng"
	defaultHostCNIBinPath        = "/host/opt/cni/bin"
	defaultHostCNIConfDir        = "/host/etc/cni/net.d"
	minMTUv4, minMTUv6, maxMTU   = 576, 1280, 9001
)

// envCNIVersion overrides the conflist's top-level cniVersion (this
// project's addition; upstream always ships the template's 0.4.0).
const envCNIVersion = "AWS_VPC_CNI_CONFLIST_CNI_VERSION"

// settings is everything the entrypoint takes from the environment.
type settings struct {
	VethPrefix     string
	MTU            int // pod MTU written into the conflist
	PodSGMode      string
	PluginLogFile  string
	PluginLogLevel string
	// IPv6 is ENABLE_IPv6: an IPv6 cluster, whose pods get IPv4 egress
	// from egress-cni; an IPv4 cluster's pods may get IPv6 egress.
	IPv6 bool
	// EgressEnabled renders __EGRESSPLUGINENABLED__: ENABLE_V4_EGRESS
	// (default true) in an IPv6 cluster, ENABLE_V6_EGRESS (default false)
	// in an IPv4 one; cleared when an IPv4 cluster's node has no IPv6
	// address (resolveNodeIP).
	EgressEnabled bool
	// EgressPluginLogFile is the egress plugin's pluginLogFile
	// (__EGRESSPLUGINLOGFILE__); it logs at PluginLogLevel, as upstream's.
	EgressPluginLogFile string
	// RandomizeSNAT is AWS_VPC_K8S_CNI_RANDOMIZESNAT, rendered as is into
	// __RANDOMIZESNAT__ (the plugin reads none, hashrandom, else
	// --random-fully, as upstream).
	RandomizeSNAT string
	// NodeIP is __NODEIP__, the egress SNAT target, from IMDS
	// (resolveNodeIP): local-ipv4 in an IPv6 cluster, ipv6 in an IPv4
	// cluster with IPv6 egress, else empty.
	NodeIP         string
	Bandwidth      bool   // ENABLE_BANDWIDTH_PLUGIN: chain "bandwidth"
	DisablePodV6   bool   // DISABLE_POD_V6: chain "tuning" turning IPv6 off in pods
	CNIVersion     string // "" keeps the template's
	HostCNIBinPath string
	HostCNIConfDir string
}

var cniVersionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)

// loadSettings reads and validates the environment as upstream's entrypoint
// does, reporting every problem at once; booleans it cannot parse (an
// empty value included, as upstream's bool helper) are warned about
// (env.Warn) and take their default. Two deliberate differences: an empty
// string or number counts as unset, and the prefix-delegation
// check compares the warm/minimum targets as numbers (upstream compares
// strings, so "-5" or "00" pass or fail by accident).
func loadSettings(env envutil.Env) (settings, error) {
	cniVersion, _ := env.Value(envCNIVersion)
	s := settings{
		VethPrefix:     env.String("AWS_VPC_K8S_CNI_VETHPREFIX", defaultVethPrefix),
		PodSGMode:      env.String("POD_SECURITY_GROUP_ENFORCING_MODE", defaultPodSGMode),
		PluginLogFile:  env.String("AWS_VPC_K8S_PLUGIN_LOG_FILE", defaultPluginLogFile),
		PluginLogLevel: env.String("AWS_VPC_K8S_PLUGIN_LOG_LEVEL", defaultPluginLogLevel),
		Bandwidth:      env.StrictBool("ENABLE_BANDWIDTH_PLUGIN", false),
		DisablePodV6:   env.StrictBool("DISABLE_POD_V6", false),
		CNIVersion:     cniVersion,
		HostCNIBinPath: env.String("HOST_CNI_BIN_PATH", defaultHostCNIBinPath),
		HostCNIConfDir: env.String("HOST_CNI_CONFDIR_PATH", defaultHostCNIConfDir),
	}
	ipv6 := env.StrictBool("ENABLE_IPv6", false)
	s.IPv6 = ipv6
	if ipv6 {
		s.EgressEnabled = env.StrictBool("ENABLE_V4_EGRESS", true)
		s.EgressPluginLogFile = env.String("AWS_VPC_K8S_EGRESS_V4_PLUGIN_LOG_FILE", defaultEgressV4PluginLogFile)
	} else {
		s.EgressEnabled = env.StrictBool("ENABLE_V6_EGRESS", false)
		s.EgressPluginLogFile = env.String("AWS_VPC_K8S_EGRESS_V6_PLUGIN_LOG_FILE", defaultEgressV6PluginLogFile)
	}
	s.RandomizeSNAT = env.String("AWS_VPC_K8S_CNI_RANDOMIZESNAT", defaultRandomizeSNAT)
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	if strings.EqualFold(s.PluginLogFile, "stdout") {
		bad("AWS_VPC_K8S_PLUGIN_LOG_FILE cannot be stdout: the CNI plugin's stdout carries its result to the runtime")
	}
	switch p := s.VethPrefix; {
	case len(p) > 4:
		bad("AWS_VPC_K8S_CNI_VETHPREFIX %q is longer than 4 characters", p)
	case p == "eth" || p == "lo" || p == "vlan":
		bad("AWS_VPC_K8S_CNI_VETHPREFIX cannot be %q: it is reserved for the node's own interfaces", p)
	}
	if env.StrictBool("ENABLE_POD_ENI", false) && s.PodSGMode != "strict" && s.PodSGMode != "standard" {
		bad("POD_SECURITY_GROUP_ENFORCING_MODE %q must be strict or standard", s.PodSGMode)
	}
	if _, _, err := env.LookupInt("IP_COOLDOWN_PERIOD", 0, math.MaxInt); err != nil {
		bad("%w (seconds)", err)
	}

	minMTU := minMTUv4
	if ipv6 {
		minMTU = minMTUv6
	}
	mtu := func(name string) (int, bool) {
		n, ok, err := env.LookupInt(name, minMTU, maxMTU)
		if err != nil {
			errs = append(errs, err)
			return 0, false
		}
		return n, ok
	}
	s.MTU = defaultMTU
	eniMTU, eniOK := mtu("AWS_VPC_ENI_MTU")
	podMTU, podOK := mtu("POD_MTU")
	switch {
	case podOK:
		s.MTU = podMTU
	case eniOK:
		s.MTU = eniMTU
	}

	if env.StrictBool("ENABLE_PREFIX_DELEGATION", false) {
		positive := false
		for _, name := range []string{"WARM_IP_TARGET", "WARM_PREFIX_TARGET", "MINIMUM_IP_TARGET"} {
			// Unset, garbage or <= 0 all count as not positive here;
			// ipamd warns about garbage itself.
			if _, ok, err := env.LookupInt(name, 1, math.MaxInt); ok && err == nil {
				positive = true
			}
		}
		if !positive {
			bad("ENABLE_PREFIX_DELEGATION=true needs at least one of WARM_IP_TARGET, WARM_PREFIX_TARGET, MINIMUM_IP_TARGET set above 0")
		}
	}
	if s.CNIVersion != "" && !cniVersionRE.MatchString(s.CNIVersion) {
		bad("%s %q must be a CNI spec version such as 1.1.0", envCNIVersion, s.CNIVersion)
	}
	return s, errors.Join(errs...)
}
