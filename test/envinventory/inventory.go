// Package envinventory is the list of every environment variable upstream
// aws-node v1.23.1 reads (its ipamd, networkutils, entrypoint and init
// container), and of the ones this project adds, each with what this build
// does with it. The tests beside it, and the readers' own tests in
// cmd/aws-vpc-cni and cmd/aws-vpc-cni-init, hold every component to the
// list: a variable marked honoured must be looked up by the component said
// to read it (and a changed value must change what it loads), a refused
// one must stop ipamd with an error naming it, and docs/upgrade.md must
// list each with the same status. So no upstream setting can be silently
// ignored.
//
// The package is data only: it imports nothing of this module, so the
// binaries' tests may import it without linking ipamd.
package envinventory

// Status is what this build does with a variable.
type Status int

const (
	// Honoured: read, with upstream's meaning and default.
	Honoured Status = iota + 1
	// Inert: upstream reads it only in a mode this build refuses (Gate);
	// in every mode this build runs, upstream ignores it too.
	Inert
	// Refused: a non-default value (Sample) makes ipamd refuse to start
	// with an error naming the variable.
	Refused
	// NotReadUpstream: documented upstream but read by nothing there
	// (deprecated); nothing here reads it either.
	NotReadUpstream
	// New: this project's own setting.
	New
)

// Doc is the status as docs/upgrade.md's table writes it (the start of
// its Status cell).
func (s Status) Doc() string {
	switch s {
	case Honoured, Inert:
		return "same as upstream"
	case Refused:
		return "refused"
	case NotReadUpstream:
		return "not read"
	case New:
		return "new"
	}
	return "?"
}

// Reader is a component that reads the environment.
type Reader string

// The readers. IPAMD is ipamd's configuration loader, which takes in the
// host-networking settings (pkg/networkutils) and the pod-IP reconciler's.
const (
	IPAMD      Reader = "ipamd"
	Entrypoint Reader = "entrypoint"
	Init       Reader = "init"
)

// Var is one variable.
type Var struct {
	Name     string
	Upstream bool // upstream aws-node reads it (facts sheet §4, §1.3, §1.5)
	Status   Status
	ReadBy   []Reader
	// Sample is a valid value other than the default: for Honoured it
	// changes what each reader loads (unless a reader's test says it only
	// validates it); for Refused it makes ipamd refuse to start.
	Sample string
	// Gate names the refused variable whose mode alone makes upstream use
	// an Inert variable.
	Gate string
}

// Reads says whether r is among v's readers.
func (v Var) Reads(r Reader) bool {
	for _, x := range v.ReadBy {
		if x == r {
			return true
		}
	}
	return false
}

func up(name string, s Status, sample string, r ...Reader) Var {
	return Var{Name: name, Upstream: true, Status: s, ReadBy: r, Sample: sample}
}

func ours(name, sample string, r ...Reader) Var {
	return Var{Name: name, Status: New, ReadBy: r, Sample: sample}
}

// All is every variable, upstream's in the facts sheet's order, then the
// ones this project adds.
var All = []Var{
	// §4.1 Pool sizing and IPAM mode.
	up("WARM_ENI_TARGET", Honoured, "3", IPAMD),
	up("WARM_IP_TARGET", Honoured, "5", IPAMD, Entrypoint),
	up("MINIMUM_IP_TARGET", Honoured, "10", IPAMD, Entrypoint),
	up("WARM_PREFIX_TARGET", Honoured, "2", IPAMD, Entrypoint),
	up("ENABLE_PREFIX_DELEGATION", Honoured, "true", IPAMD, Entrypoint),
	up("MAX_ENI", Honoured, "2", IPAMD),
	// No sample: false is upstream's default, and ipamd then refuses to
	// start because neither family is on (as upstream does).
	up("ENABLE_IPv4", Honoured, "", IPAMD),
	// No sample: true alone is refused (it needs ENABLE_IPv4=false and
	// prefix delegation, as upstream); pkg/ipamd's tests cover IPv6 mode.
	up("ENABLE_IPv6", Honoured, "", IPAMD, Entrypoint, Init),
	up("IP_COOLDOWN_PERIOD", Honoured, "5", IPAMD, Entrypoint),
	up("ENABLE_MULTI_NIC", Honoured, "true", IPAMD),

	// §4.2 ENI placement, tagging, AWS access.
	up("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", Honoured, "true", IPAMD),
	up("ENI_CONFIG_ANNOTATION_DEF", Honoured, "example.com/eni-config", IPAMD),
	up("ENI_CONFIG_LABEL_DEF", Honoured, "topology.kubernetes.io/zone", IPAMD),
	up("ENABLE_SUBNET_DISCOVERY", Honoured, "false", IPAMD),
	up("CLUSTER_NAME", Honoured, "prod", IPAMD),
	up("ADDITIONAL_ENI_TAGS", Honoured, `{"team":"net"}`, IPAMD),
	up("MANAGE_UNTAGGED_ENI", Honoured, "false", IPAMD),
	up("DISABLE_NETWORK_RESOURCE_PROVISIONING", Honoured, "true", IPAMD),
	up("ENABLE_IMDS_ONLY_MODE", Honoured, "true", IPAMD),
	up("DISABLE_LEAKED_ENI_CLEANUP", Honoured, "true", IPAMD),
	up("AWS_MANAGE_ENIS_NON_SCHEDULABLE", Honoured, "true", IPAMD),
	up("HTTP_TIMEOUT", Honoured, "30", IPAMD),
	up("AWS_EC2_ENDPOINT", Honoured, "https://ec2.example.internal", IPAMD),
	up("VPC_CNI_VERSION", Honoured, "v1.23.1", IPAMD),

	// §4.3 Host networking.
	up("AWS_VPC_K8S_CNI_EXTERNALSNAT", Honoured, "true", IPAMD),
	up("AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS", Honoured, "10.9.0.0/16", IPAMD),
	up("AWS_EXTERNAL_SERVICE_CIDRS", Honoured, "10.8.0.0/16", IPAMD),
	up("AWS_VPC_K8S_CNI_RANDOMIZESNAT", Honoured, "none", IPAMD, Entrypoint),
	up("AWS_VPC_CNI_NODE_PORT_SUPPORT", Honoured, "false", IPAMD),
	up("AWS_VPC_K8S_CNI_CONNMARK", Honoured, "0x100", IPAMD),
	up("AWS_VPC_ENI_MTU", Honoured, "1500", IPAMD, Entrypoint),
	up("POD_MTU", Honoured, "1400", Entrypoint),
	up("AWS_VPC_K8S_CNI_VETHPREFIX", Honoured, "cali", IPAMD, Entrypoint),
	up("ENABLE_V6_EGRESS", Honoured, "true", IPAMD, Entrypoint, Init),
	// Only an IPv6 cluster's conflist uses it (cmd/aws-vpc-cni's tests).
	up("ENABLE_V4_EGRESS", Honoured, "", Entrypoint),
	up("DISABLE_TCP_EARLY_DEMUX", Honoured, "true", Init),

	// §4.4 Features, Kubernetes, observability.
	up("ENABLE_POD_ENI", Honoured, "true", IPAMD, Entrypoint),
	up("POD_SECURITY_GROUP_ENFORCING_MODE", Honoured, "standard", IPAMD, Entrypoint),
	up("ANNOTATE_POD_IP", Honoured, "true", IPAMD),
	up("NETWORK_POLICY_ENFORCING_MODE", Honoured, "strict", IPAMD),
	up("ENABLE_BANDWIDTH_PLUGIN", Honoured, "true", Entrypoint),
	up("DISABLE_POD_V6", Honoured, "true", Entrypoint),
	up("MY_NODE_NAME", Honoured, "ip-10-0-0-1.ec2.internal", IPAMD),
	up("MY_POD_NAME", Honoured, "aws-node-abcde", IPAMD),
	up("CLUSTER_ENDPOINT", Honoured, "https://api.example.internal:443", IPAMD),
	up("AWS_VPC_K8S_CNI_BACKING_STORE", Honoured, "/var/run/aws-node/other.json", IPAMD),
	up("AWS_VPC_K8S_CNI_LOGLEVEL", Honoured, "info", IPAMD, Entrypoint),
	up("AWS_VPC_K8S_CNI_LOG_FILE", Honoured, "stdout", IPAMD),
	up("AWS_VPC_K8S_PLUGIN_LOG_FILE", Honoured, "/var/log/aws-routed-eni/other.log", Entrypoint),
	up("AWS_VPC_K8S_PLUGIN_LOG_LEVEL", Honoured, "Info", Entrypoint),
	up("AWS_VPC_K8S_EGRESS_V4_PLUGIN_LOG_FILE", Honoured, "", Entrypoint),
	up("AWS_VPC_K8S_EGRESS_V6_PLUGIN_LOG_FILE", Honoured, "", Entrypoint),
	up("DISABLE_METRICS", Honoured, "true", IPAMD),
	up("DISABLE_INTROSPECTION", Honoured, "true", IPAMD),
	up("INTROSPECTION_BIND_ADDRESS", Honoured, "unix:/var/run/aws-node/introspect.sock", IPAMD),
	up("HOST_CNI_BIN_PATH", Honoured, "/host/opt/cni/other", Entrypoint, Init),
	up("HOST_CNI_CONFDIR_PATH", Honoured, "/host/etc/cni/other", Entrypoint),

	// Documented upstream, read by nothing there (deprecated).
	up("AWS_VPC_K8S_CNI_CONFIGURE_RPFILTER", NotReadUpstream, ""),
	up("ENABLE_NFTABLES", NotReadUpstream, ""),

	// This project's own.
	ours("POD_IP_RECONCILE_MODE", "report", IPAMD),
	ours("POD_IP_RECONCILE_INTERVAL", "2m", IPAMD),
	ours("POD_IP_RECONCILE_GRACE_PERIOD", "10m", IPAMD),
	ours("POD_IP_RECONCILE_MAX_RELEASE_PER_PASS", "5", IPAMD),
	ours("EC2_API_RATE_LIMIT", "0.5", IPAMD),
	ours("EC2_API_BURST", "5", IPAMD),
	ours("WARM_POOL_START_SPREAD", "3m", IPAMD),
	ours("IPAMD_PPROF_ADDRESS", "unix:/var/run/aws-node/pprof.sock", IPAMD),
	ours("CRI_RUNTIME_ENDPOINT", "unix:///run/containerd/containerd.sock", IPAMD),
	ours("AWS_VPC_CNI_CONFLIST_CNI_VERSION", "1.1.0", Entrypoint),
	ours("KUBECONFIG", "/root/.kube/config", IPAMD),
}

// EmptyWarns are ipamd's booleans upstream parses with its stricter
// helper, which complains about a set but empty value; ipamd's other
// booleans take an empty value as unset silently, as upstream's ipamd and
// networkutils helpers do. (The entrypoint's and init's booleans all use
// the stricter helper.)
var EmptyWarns = map[string]bool{
	"ANNOTATE_POD_IP":                       true,
	"DISABLE_INTROSPECTION":                 true,
	"DISABLE_LEAKED_ENI_CLEANUP":            true,
	"DISABLE_METRICS":                       true,
	"DISABLE_NETWORK_RESOURCE_PROVISIONING": true,
	"ENABLE_IMDS_ONLY_MODE":                 true,
	"ENABLE_IPv4":                           true,
	"ENABLE_IPv6":                           true,
	"ENABLE_MULTI_NIC":                      true,
	"ENABLE_POD_ENI":                        true,
	"ENABLE_PREFIX_DELEGATION":              true,
	"MANAGE_UNTAGGED_ENI":                   true,
}

// Lookup finds a variable of All by name.
func Lookup(name string) (Var, bool) {
	for _, v := range All {
		if v.Name == name {
			return v, true
		}
	}
	return Var{}, false
}
