package ipamd

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

// Config is ipamd's configuration, read from the same environment variables
// as upstream aws-node, with the same defaults and parsing.
type Config struct {
	WarmENITarget    int // WARM_ENI_TARGET, default 1
	WarmIPTarget     int // WARM_IP_TARGET, 0 = unset
	MinimumIPTarget  int // MINIMUM_IP_TARGET, 0 = unset
	WarmPrefixTarget int // WARM_PREFIX_TARGET, 0 = unset
	PrefixDelegation bool
	MaxENI           int // MAX_ENI, -1 = instance limit
	EnableIPv4       bool
	EnableIPv6       bool
	IPCooldown       time.Duration

	CheckpointPath string
	LogLevel       string
	LogFile        string

	DisableMetrics           bool
	DisableIntrospection     bool
	IntrospectionBindAddress string

	NetworkPolicyMode string // "", none, strict, standard
	ExternalSNAT      bool
	ExcludeSNATCIDRs  []string

	CustomNetworking                   bool
	ManageENIsNonSchedulable           bool
	SubnetDiscovery                    bool
	DisableNetworkResourceProvisioning bool // also true under ENABLE_IMDS_ONLY_MODE
	// IMDSOnlyMode (ENABLE_IMDS_ONLY_MODE): ENIs and addresses from IMDS
	// only, no EC2 call that changes anything, no DescribeNetworkInterfaces.
	IMDSOnlyMode bool
	// ManageUntaggedENI (MANAGE_UNTAGGED_ENI, default true): use attached
	// ENIs that lack this instance's node.k8s.amazonaws.com/instance_id tag.
	ManageUntaggedENI bool
	// HTTPTimeout (HTTP_TIMEOUT, whole seconds, default 10; values below 10
	// or unparsable fall back to 10 as upstream) bounds each EC2 and IMDS
	// HTTP request.
	HTTPTimeout time.Duration
	// EC2Endpoint (AWS_EC2_ENDPOINT) is a custom EC2 endpoint URL.
	EC2Endpoint    string
	EnablePodENI   bool
	EnableMultiNIC bool
	NodeName       string
	PodName        string
	VPCCNIVersion  string
	ClusterName    string

	// Settings of networkutils that introspection reports.
	Connmark             uint32
	ExternalServiceCIDRs []string
	ENIMTU               int
	VethPrefix           string
	NodePortSupport      bool
	RandomizeSNAT        string

	Reconciler podip.Config
}

// Defaults that upstream uses.
const (
	DefaultIntrospectionAddress = "127.0.0.1:61679"
	DefaultMetricsAddress       = ":61678"
	DefaultSocketPath           = "/var/run/aws-node/ipamd.sock"
	DefaultLogFile              = "/host/var/log/aws-routed-eni/ipamd.log"
)

// LoadConfig reads the configuration from env (os.LookupEnv in production).
func LoadConfig(env envutil.Lookup) (Config, error) {
	c := Config{
		WarmENITarget:    envutil.Int(env, "WARM_ENI_TARGET", 1, 0),
		WarmIPTarget:     envutil.Int(env, "WARM_IP_TARGET", 0, 0),
		MinimumIPTarget:  envutil.Int(env, "MINIMUM_IP_TARGET", 0, 0),
		WarmPrefixTarget: envutil.Int(env, "WARM_PREFIX_TARGET", 0, 0),
		PrefixDelegation: envutil.Bool(env, "ENABLE_PREFIX_DELEGATION", false),
		MaxENI:           envutil.Int(env, "MAX_ENI", -1, math.MinInt),
		EnableIPv4:       envutil.Bool(env, "ENABLE_IPv4", false),
		EnableIPv6:       envutil.Bool(env, "ENABLE_IPv6", false),
		IPCooldown:       time.Duration(envutil.Int(env, "IP_COOLDOWN_PERIOD", 30, 0)) * time.Second,

		CheckpointPath: envutil.String(env, "AWS_VPC_K8S_CNI_BACKING_STORE", datastore.DefaultCheckpointPath),
		LogLevel:       envutil.String(env, "AWS_VPC_K8S_CNI_LOGLEVEL", "Debug"),
		LogFile:        envutil.String(env, "AWS_VPC_K8S_CNI_LOG_FILE", DefaultLogFile),

		DisableMetrics:           envutil.Bool(env, "DISABLE_METRICS", false),
		DisableIntrospection:     envutil.Bool(env, "DISABLE_INTROSPECTION", false),
		IntrospectionBindAddress: envutil.String(env, "INTROSPECTION_BIND_ADDRESS", DefaultIntrospectionAddress),

		ExternalSNAT:     envutil.Bool(env, "AWS_VPC_K8S_CNI_EXTERNALSNAT", false),
		ExcludeSNATCIDRs: envutil.List(env, "AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS"),

		CustomNetworking:                   envutil.Bool(env, "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", false),
		ManageENIsNonSchedulable:           envutil.Bool(env, "AWS_MANAGE_ENIS_NON_SCHEDULABLE", false),
		SubnetDiscovery:                    envutil.Bool(env, "ENABLE_SUBNET_DISCOVERY", true),
		DisableNetworkResourceProvisioning: envutil.Bool(env, "DISABLE_NETWORK_RESOURCE_PROVISIONING", false),
		IMDSOnlyMode:                       envutil.Bool(env, "ENABLE_IMDS_ONLY_MODE", false),
		ManageUntaggedENI:                  envutil.Bool(env, "MANAGE_UNTAGGED_ENI", true),
		HTTPTimeout:                        time.Duration(envutil.Int(env, "HTTP_TIMEOUT", 10, 10)) * time.Second,
		EC2Endpoint:                        envutil.String(env, "AWS_EC2_ENDPOINT", ""),
		EnablePodENI:                       envutil.Bool(env, "ENABLE_POD_ENI", false),
		EnableMultiNIC:                     envutil.Bool(env, "ENABLE_MULTI_NIC", false),
		NodeName:                           envutil.String(env, "MY_NODE_NAME", ""),
		PodName:                            envutil.String(env, "MY_POD_NAME", ""),
		VPCCNIVersion:                      envutil.String(env, "VPC_CNI_VERSION", ""),
		ClusterName:                        envutil.String(env, "CLUSTER_NAME", ""),

		Connmark:             parseConnmark(env),
		ExternalServiceCIDRs: envutil.List(env, "AWS_EXTERNAL_SERVICE_CIDRS"),
		ENIMTU:               envutil.Int(env, "AWS_VPC_ENI_MTU", 9001, 0),
		VethPrefix:           envutil.String(env, "AWS_VPC_K8S_CNI_VETHPREFIX", "eni"),
		NodePortSupport:      envutil.Bool(env, "AWS_VPC_CNI_NODE_PORT_SUPPORT", true),
		RandomizeSNAT:        envutil.String(env, "AWS_VPC_K8S_CNI_RANDOMIZESNAT", "prng"),
	}
	if c.IMDSOnlyMode {
		// As upstream: IMDS-only mode implies no network resource provisioning.
		c.DisableNetworkResourceProvisioning = true
	}
	rc, err := podip.LoadConfig(env)
	if err != nil {
		return c, err
	}
	c.Reconciler = rc
	if v, ok := env("NETWORK_POLICY_ENFORCING_MODE"); ok && v != "" {
		switch m := strings.ToLower(v); m {
		case "none", "strict", "standard":
			c.NetworkPolicyMode = m
		default:
			return c, fmt.Errorf("NETWORK_POLICY_ENFORCING_MODE=%q: must be none, strict or standard", v)
		}
	}
	return c, c.validate()
}

// ErrUnsupported marks settings this build refuses rather than half-honours.
var ErrUnsupported = errors.New("not supported by this build")

func (c Config) validate() error {
	switch {
	case c.EnableIPv4 == c.EnableIPv6:
		return errors.New("exactly one of ENABLE_IPv4 and ENABLE_IPv6 must be true")
	case c.EnableIPv6:
		return fmt.Errorf("ENABLE_IPv6=true: IPv6 mode is %w", ErrUnsupported)
	case c.CustomNetworking:
		return fmt.Errorf("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true: custom networking is %w", ErrUnsupported)
	case c.EnablePodENI:
		return fmt.Errorf("ENABLE_POD_ENI=true: security groups for pods are %w", ErrUnsupported)
	case c.EnableMultiNIC:
		return fmt.Errorf("ENABLE_MULTI_NIC=true: multi-NIC pods are %w", ErrUnsupported)
	}
	return validEndpoint("AWS_EC2_ENDPOINT", c.EC2Endpoint)
}

// validEndpoint refuses an endpoint that is set but not an absolute http(s)
// URL: the SDK would send every call nowhere.
func validEndpoint(name, v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%s=%q: must be an absolute http(s) URL such as https://ec2.us-west-2.amazonaws.com", name, v)
	}
	return nil
}

// parseConnmark reads AWS_VPC_K8S_CNI_CONNMARK (base auto-detected, 0x80 by
// default; values <= 0 or beyond 32 bits fall back to the default).
func parseConnmark(env envutil.Lookup) uint32 {
	const def = 0x80
	v, ok := env("AWS_VPC_K8S_CNI_CONNMARK")
	if !ok || v == "" {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 0, 64)
	if err != nil || n <= 0 || n > math.MaxUint32 {
		return def
	}
	return uint32(n)
}
