package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

// Config is ipamd's configuration, read from the same environment variables
// as upstream aws-node, with the same defaults and parsing (docs/upgrade.md
// lists every variable and whether it is honoured or refused).
//
// Groups are alphabetical by variable within each; one field per line.
type Config struct {
	// Pool sizing and IPAM mode.
	EnableIPv4       bool          // ENABLE_IPv4, default false (the chart sets true)
	EnableIPv6       bool          // ENABLE_IPv6: pods from the primary ENI's IPv6 /80 (with prefix delegation)
	EnableMultiNIC   bool          // ENABLE_MULTI_NIC: a pool per network card (not with IPv6)
	IPCooldown       time.Duration // IP_COOLDOWN_PERIOD, whole seconds, default 30
	MaxENI           int           // MAX_ENI, -1 = instance limit
	MinimumIPTarget  int           // MINIMUM_IP_TARGET, 0 = unset
	PrefixDelegation bool          // ENABLE_PREFIX_DELEGATION
	WarmENITarget    int           // WARM_ENI_TARGET, default 1
	WarmIPTarget     int           // WARM_IP_TARGET, 0 = unset
	WarmPrefixTarget int           // WARM_PREFIX_TARGET, 0 = unset

	// ENI placement and AWS access.
	// AdditionalENITags (ADDITIONAL_ENI_TAGS) as set; awsutils drops the
	// keys upstream reserves, and the agent warns about them.
	AdditionalENITags                  map[string]string
	ClusterName                        string          // CLUSTER_NAME
	CustomNetworking                   bool            // AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG: new ENIs from the node's ENIConfig
	DisableLeakedENICleanup            bool            // DISABLE_LEAKED_ENI_CLEANUP
	DisableNetworkResourceProvisioning bool            // DISABLE_NETWORK_RESOURCE_PROVISIONING; also true under ENABLE_IMDS_ONLY_MODE
	EC2Endpoint                        string          // AWS_EC2_ENDPOINT: a custom EC2 endpoint URL (honoured for EC2, unlike upstream)
	ENIConfigAnnotation                string          // ENI_CONFIG_ANNOTATION_DEF: node annotation naming the ENIConfig
	ENIConfigLabel                     string          // ENI_CONFIG_LABEL_DEF: node label naming the ENIConfig
	HTTPTimeout                        time.Duration   // HTTP_TIMEOUT, whole seconds, at least (and default) 10: each EC2 and IMDS request
	EC2Budget                          awsutils.Budget // EC2_API_RATE_LIMIT, EC2_API_BURST: the node's EC2 request budget
	WarmStartSpread                    time.Duration   // WARM_POOL_START_SPREAD: warm-only growth after start begins at a random point of it (10m)
	// IMDSOnlyMode (ENABLE_IMDS_ONLY_MODE): ENIs and addresses from IMDS
	// only, no EC2 call that changes anything, no DescribeNetworkInterfaces.
	IMDSOnlyMode bool
	// ManageUntaggedENI (MANAGE_UNTAGGED_ENI, default true): use attached
	// ENIs that lack this instance's node.k8s.amazonaws.com/instance_id tag.
	ManageUntaggedENI        bool
	ManageENIsNonSchedulable bool   // AWS_MANAGE_ENIS_NON_SCHEDULABLE
	SubnetDiscovery          bool   // ENABLE_SUBNET_DISCOVERY, default true
	VPCCNIVersion            string // VPC_CNI_VERSION, in the user agents

	// Host networking (pkg/networkutils reads these variables; ipamd hands
	// them to the host setup and reports them on introspection).
	Network networkutils.Config

	// Features, Kubernetes, observability.
	AnnotatePodIP            bool   // ANNOTATE_POD_IP: pod IP annotation; needs the API server at start
	CheckpointPath           string // AWS_VPC_K8S_CNI_BACKING_STORE
	ClusterEndpoint          string // CLUSTER_ENDPOINT: API server address override
	DisableIntrospection     bool   // DISABLE_INTROSPECTION
	DisableMetrics           bool   // DISABLE_METRICS
	EnablePodENI             bool   // ENABLE_POD_ENI: security groups for pods (trunk ENI); needs the API server at start
	PodSGMode                string // POD_SECURITY_GROUP_ENFORCING_MODE: strict (default) or standard
	IntrospectionBindAddress string // INTROSPECTION_BIND_ADDRESS
	PprofAddress             string // IPAMD_PPROF_ADDRESS: net/http/pprof on loopback or a unix socket; "" = off
	Kubeconfig               string // KUBECONFIG: only outside a pod (development)
	LogFile                  string // AWS_VPC_K8S_CNI_LOG_FILE
	LogLevel                 string // AWS_VPC_K8S_CNI_LOGLEVEL
	NetworkPolicyMode        string // NETWORK_POLICY_ENFORCING_MODE: "", none, strict, standard
	NodeName                 string // MY_NODE_NAME
	PodName                  string // MY_POD_NAME

	// Reconciler is this project's pod-IP reconciler (POD_IP_RECONCILE_*,
	// CRI_RUNTIME_ENDPOINT).
	Reconciler podip.Config
}

// Defaults that upstream uses.
const (
	DefaultIntrospectionAddress = "127.0.0.1:61679"
	DefaultLogFile              = "/host/var/log/aws-routed-eni/ipamd.log"
	// defaultENIConfigKey is upstream's default for both the annotation and
	// the label that name a node's ENIConfig (eniconfig.DefaultKey).
	defaultENIConfigKey = "k8s.amazonaws.com/eniConfig"
)

// LoadConfig reads the configuration from lookup (os.LookupEnv in
// production); warnings about unusable values go to slog.Default().
func LoadConfig(lookup envutil.Lookup) (Config, error) {
	return Load(envutil.Env{Lookup: lookup})
}

// Load reads the configuration through env. A value that does not parse
// takes its default and is reported to env.Warn; a setting this build
// refuses, or one upstream refuses too, is an error naming the variable.
//
// StrictBool is used where upstream parses with its stricter helper (a
// set but empty value is warned about), Bool where upstream's ipamd and
// networkutils helpers take empty as unset.
func Load(env envutil.Env) (Config, error) {
	c := Config{
		EnableIPv4:       env.StrictBool("ENABLE_IPv4", false),
		EnableIPv6:       env.StrictBool("ENABLE_IPv6", false),
		EnableMultiNIC:   env.StrictBool("ENABLE_MULTI_NIC", false),
		IPCooldown:       env.Seconds("IP_COOLDOWN_PERIOD", 30*time.Second, 0),
		MaxENI:           env.Int("MAX_ENI", -1, math.MinInt),
		MinimumIPTarget:  env.Int("MINIMUM_IP_TARGET", 0, 0),
		PrefixDelegation: env.StrictBool("ENABLE_PREFIX_DELEGATION", false),
		WarmENITarget:    env.Int("WARM_ENI_TARGET", 1, 0),
		WarmIPTarget:     env.Int("WARM_IP_TARGET", 0, 0),
		WarmPrefixTarget: env.Int("WARM_PREFIX_TARGET", 0, 0),

		AdditionalENITags:                  env.StringMap("ADDITIONAL_ENI_TAGS"),
		ClusterName:                        env.String("CLUSTER_NAME", ""),
		CustomNetworking:                   env.Bool("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", false),
		DisableLeakedENICleanup:            env.StrictBool("DISABLE_LEAKED_ENI_CLEANUP", false),
		DisableNetworkResourceProvisioning: env.StrictBool("DISABLE_NETWORK_RESOURCE_PROVISIONING", false),
		EC2Endpoint:                        env.String("AWS_EC2_ENDPOINT", ""),
		ENIConfigAnnotation:                env.String("ENI_CONFIG_ANNOTATION_DEF", defaultENIConfigKey),
		ENIConfigLabel:                     env.String("ENI_CONFIG_LABEL_DEF", defaultENIConfigKey),
		HTTPTimeout:                        env.Seconds("HTTP_TIMEOUT", 10*time.Second, 10),
		IMDSOnlyMode:                       env.StrictBool("ENABLE_IMDS_ONLY_MODE", false),
		ManageUntaggedENI:                  env.StrictBool("MANAGE_UNTAGGED_ENI", true),
		ManageENIsNonSchedulable:           env.Bool("AWS_MANAGE_ENIS_NON_SCHEDULABLE", false),
		SubnetDiscovery:                    env.Bool("ENABLE_SUBNET_DISCOVERY", true),
		VPCCNIVersion:                      env.String("VPC_CNI_VERSION", ""),

		Network: networkutils.LoadEnv(env),

		AnnotatePodIP:            env.StrictBool("ANNOTATE_POD_IP", false),
		CheckpointPath:           env.String("AWS_VPC_K8S_CNI_BACKING_STORE", datastore.DefaultCheckpointPath),
		ClusterEndpoint:          env.String("CLUSTER_ENDPOINT", ""),
		DisableIntrospection:     env.StrictBool("DISABLE_INTROSPECTION", false),
		DisableMetrics:           env.StrictBool("DISABLE_METRICS", false),
		EnablePodENI:             env.StrictBool("ENABLE_POD_ENI", false),
		PodSGMode:                env.String("POD_SECURITY_GROUP_ENFORCING_MODE", PodSGModeStrict),
		IntrospectionBindAddress: env.String("INTROSPECTION_BIND_ADDRESS", DefaultIntrospectionAddress),
		Kubeconfig:               env.String("KUBECONFIG", ""),
		LogFile:                  env.String("AWS_VPC_K8S_CNI_LOG_FILE", DefaultLogFile),
		LogLevel:                 env.String("AWS_VPC_K8S_CNI_LOGLEVEL", "Debug"),
		NodeName:                 env.String("MY_NODE_NAME", ""),
		PodName:                  env.String("MY_POD_NAME", ""),
	}
	// networkutils reads ENABLE_V6_EGRESS (as upstream's does); the
	// cluster family is ipamd's to give it.
	c.Network.IPv6 = c.EnableIPv6
	// The host's local-table rules depend on both (networkutils).
	c.Network.PodENI = c.EnablePodENI
	c.Network.PodSGStrict = c.PodSGMode == PodSGModeStrict
	if c.IMDSOnlyMode {
		// As upstream: IMDS-only mode implies no network resource provisioning.
		c.DisableNetworkResourceProvisioning = true
	}
	rc, err := podip.LoadConfig(env.Lookup)
	if err != nil {
		return c, err
	}
	if c.EC2Budget, err = loadEC2Budget(env); err != nil {
		return c, err
	}
	if c.WarmStartSpread, err = loadWarmStartSpread(env); err != nil {
		return c, err
	}
	if c.PprofAddress, err = loadPprofAddress(env); err != nil {
		return c, err
	}
	c.Reconciler = rc
	if c.NetworkPolicyMode, err = networkPolicyMode(env); err != nil {
		return c, err
	}
	return c, c.validate()
}

// networkPolicyMode reads NETWORK_POLICY_ENFORCING_MODE as upstream does:
// unset is "", and a set value (the empty string included) must be none,
// strict or standard in any case, or ipamd refuses to start.
func networkPolicyMode(env envutil.Env) (string, error) {
	const name = "NETWORK_POLICY_ENFORCING_MODE"
	v, set := env.Raw(name)
	if !set {
		return "", nil
	}
	switch m := strings.ToLower(strings.TrimSpace(v)); m {
	case "none", "strict", "standard":
		return m, nil
	}
	return "", fmt.Errorf("%s=%q: must be none, strict or standard", name, v)
}

// Values of POD_SECURITY_GROUP_ENFORCING_MODE.
const (
	PodSGModeStrict   = "strict"
	PodSGModeStandard = "standard"
)

// ErrUnsupported marks settings this build refuses rather than half-honours.
var ErrUnsupported = errors.New("not supported by this build")

func (c Config) validate() error {
	switch {
	case c.EnableIPv4 == c.EnableIPv6:
		return fmt.Errorf("exactly one of ENABLE_IPv4 and ENABLE_IPv6 must be true (ENABLE_IPv4=%t, ENABLE_IPv6=%t)", c.EnableIPv4, c.EnableIPv6)
	case c.EnableIPv6 && !c.PrefixDelegation:
		return errors.New("ENABLE_IPv6=true needs ENABLE_PREFIX_DELEGATION=true: pods take addresses from an IPv6 /80 prefix, as upstream requires")
	case c.EnableIPv6 && c.CustomNetworking:
		return errors.New("ENABLE_IPv6=true cannot be combined with AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true, as upstream")
	case c.EnablePodENI && c.PodSGMode != PodSGModeStrict && c.PodSGMode != PodSGModeStandard:
		// As the entrypoint (upstream's checks): the mode decides the host's
		// local-table rules, so a typo must not pick one silently.
		return fmt.Errorf("ENABLE_POD_ENI=true: POD_SECURITY_GROUP_ENFORCING_MODE=%q must be strict or standard", c.PodSGMode)
	case c.EnableMultiNIC && c.EnableIPv6:
		// Upstream gives each card above 0 an IPv6 ENI; this build has
		// not been tested there, so it refuses rather than half-honours.
		return fmt.Errorf("ENABLE_MULTI_NIC=true with ENABLE_IPv6=true: multi-NIC pods in IPv6 mode are %w", ErrUnsupported)
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

// ExcludeSNATStrings is AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS as the CNI
// reply carries it: the valid IPv4 entries, normalised as upstream does.
func (c Config) ExcludeSNATStrings() []string {
	var out []string
	for _, p := range c.Network.ExcludeSNATCIDRs {
		out = append(out, p.String())
	}
	return out
}
