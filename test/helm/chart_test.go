package helmtest

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The runtimes' socket directories (what the chart mounts) and sockets.
const (
	containerdDir    = "/run/containerd"
	containerdSocket = containerdDir + "/containerd.sock"
	crioDir          = "/var/run/crio"
	crioSocket       = crioDir + "/crio.sock"
)

// defaultEnv is the aws-node environment of the default values: the
// upstream chart's env keys and defaults plus the reconciler settings.
var defaultEnv = map[string]string{
	"ADDITIONAL_ENI_TAGS":                   "{}",
	"AWS_VPC_CNI_NODE_PORT_SUPPORT":         "true",
	"AWS_VPC_ENI_MTU":                       "9001",
	"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG":    "false",
	"AWS_VPC_K8S_CNI_EXTERNALSNAT":          "false",
	"AWS_VPC_K8S_CNI_LOGLEVEL":              "DEBUG",
	"AWS_VPC_K8S_CNI_LOG_FILE":              "/host/var/log/aws-routed-eni/ipamd.log",
	"AWS_VPC_K8S_CNI_RANDOMIZESNAT":         "prng",
	"AWS_VPC_K8S_CNI_VETHPREFIX":            "eni",
	"AWS_VPC_K8S_PLUGIN_LOG_FILE":           "/var/log/aws-routed-eni/plugin.log",
	"AWS_VPC_K8S_PLUGIN_LOG_LEVEL":          "DEBUG",
	"DISABLE_INTROSPECTION":                 "false",
	"DISABLE_METRICS":                       "false",
	"DISABLE_NETWORK_RESOURCE_PROVISIONING": "false",
	"ENABLE_IMDS_ONLY_MODE":                 "false",
	"ENABLE_IPv4":                           "true",
	"ENABLE_IPv6":                           "false",
	"ENABLE_MULTI_NIC":                      "false",
	"ENABLE_POD_ENI":                        "false",
	"ENABLE_PREFIX_DELEGATION":              "false",
	"ENABLE_SUBNET_DISCOVERY":               "true",
	"NETWORK_POLICY_ENFORCING_MODE":         "standard",
	"VPC_CNI_VERSION":                       "v1.23.1",
	"WARM_ENI_TARGET":                       "1",
	"WARM_PREFIX_TARGET":                    "1",
	// Added by this chart.
	"POD_IP_RECONCILE_MODE":         "enforce",
	"POD_IP_RECONCILE_INTERVAL":     "1m",
	"POD_IP_RECONCILE_GRACE_PERIOD": "5m",
	"EC2_API_RATE_LIMIT":            "2",
	"EC2_API_BURST":                 "20",
	"WARM_POOL_START_SPREAD":        "10m",
	"CRI_RUNTIME_ENDPOINT":          "unix://" + containerdSocket,
}

// withEnv is defaultEnv with changes; an empty value deletes the key.
func withEnv(changes map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range defaultEnv {
		m[k] = v
	}
	for k, v := range changes {
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

// withEmpty is env with name set to the empty string (withEnv deletes).
func withEmpty(env map[string]string, name string) map[string]string {
	m := map[string]string{}
	for k, v := range env {
		m[k] = v
	}
	m[name] = ""
	return m
}

var probeCommand = []string{
	"/app/grpc-health-probe",
	"-addr=unix:///var/run/aws-node/ipamd.sock",
	"-connect-timeout=5s",
	"-rpc-timeout=5s",
}

const (
	// This project's images, tagged with the chart's appVersion.
	awsNodeImage = "ghcr.io/amazon-vpc-cni-leakfix/amazon-k8s-cni:" + appVersion
	initImage    = "ghcr.io/amazon-vpc-cni-leakfix/amazon-k8s-cni-init:" + appVersion
	// AWS's, as upstream.
	nodeAgentImage = "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon/aws-network-policy-agent:v1.4.2"
	appVersion     = "v1.23.1-leakfix.0"
)

// want says what every rendering must look like for one values file.
type want struct {
	criDir    string // mounted runtime socket directory; "" = none
	nodeAgent bool
	podsPatch bool
	extraEnv  int
	env       map[string]string // exact plain-value env of aws-node
	initIPv6  bool              // the init container writes the IPv6 sysctls
}

type chartCase struct {
	name  string
	file  string
	want  want
	check func(t *testing.T, r *rendered)
}

var chartCases = []chartCase{
	{
		name: "defaults",
		want: want{criDir: containerdDir, nodeAgent: true, env: defaultEnv},
		check: func(t *testing.T, r *rendered) {
			ds := r.daemonSet
			if got, want := ds.Spec.Selector.MatchLabels, map[string]string{
				"app.kubernetes.io/name": "aws-node", "app.kubernetes.io/instance": "aws-vpc-cni",
			}; !reflect.DeepEqual(got, want) {
				t.Errorf("selector %v, want %v", got, want)
			}
			if got := r.awsNode(t).Image; got != awsNodeImage {
				t.Errorf("aws-node image %s, want %s", got, awsNodeImage)
			}
			spec := ds.Spec.Template.Spec
			if got := container(t, spec.InitContainers, "aws-vpc-cni-init").Image; got != initImage {
				t.Errorf("init image %s, want %s", got, initImage)
			}
			agent := container(t, spec.Containers, "aws-eks-nodeagent")
			if agent.Image != nodeAgentImage {
				t.Errorf("node agent image %s, want %s", agent.Image, nodeAgentImage)
			}
			wantArgs := []string{
				"--enable-ipv6=false",
				"--enable-network-policy=false",
				"--enable-cloudwatch-logs=false",
				"--enable-policy-event-logs=false",
				"--log-file=/var/log/aws-routed-eni/network-policy-agent.log",
				"--metrics-bind-addr=:8162",
				"--health-probe-bind-addr=:8163",
				"--conntrack-cache-cleanup-period=300",
				"--conntrack-cache-table-size=524288",
				"--log-level=debug",
			}
			if !reflect.DeepEqual(agent.Args, wantArgs) {
				t.Errorf("node agent args\n%v\nwant\n%v", agent.Args, wantArgs)
			}
			if len(agent.Ports) != 1 || agent.Ports[0].Name != "agentmetrics" || agent.Ports[0].ContainerPort != 8162 {
				t.Errorf("node agent ports %v", agent.Ports)
			}
			if got := ds.Spec.UpdateStrategy; got.Type != appsv1.RollingUpdateDaemonSetStrategyType ||
				got.RollingUpdate == nil || got.RollingUpdate.MaxUnavailable == nil ||
				*got.RollingUpdate.MaxUnavailable != intstr.FromString("10%") {
				t.Errorf("update strategy %s", describe(got))
			}
			for _, c := range []*corev1.Container{r.awsNode(t), agent, container(t, spec.InitContainers, "aws-vpc-cni-init")} {
				if got := c.Resources.Requests.Cpu().String(); got != "25m" {
					t.Errorf("%s cpu request %s, want 25m (init and node agent default to resources, as upstream)", c.Name, got)
				}
			}
			if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists || spec.Tolerations[0].Key != "" {
				t.Errorf("tolerations %v", spec.Tolerations)
			}
			checkDefaultAffinity(t, spec.Affinity)
			if spec.PriorityClassName != "system-node-critical" {
				t.Errorf("priorityClassName %q", spec.PriorityClassName)
			}
			if len(r.eniConfigs)+len(r.podMonitors) != 0 {
				t.Errorf("ENIConfigs or PodMonitors rendered by default")
			}
			for _, d := range r.docs {
				if strings.Contains(d.Content, "type: Socket") {
					t.Errorf("%s names a Socket hostPath type: the runtime's directory is mounted, never its socket", d.Source)
				}
			}
			if volume(ds, "cni-config") != nil || r.configMaps["aws-node"] != nil {
				t.Errorf("cni-config rendered by default")
			}
			if sa := r.serviceAccounts; len(sa) != 1 || sa[0].Name != "aws-node" || len(sa[0].Annotations) != 0 {
				t.Errorf("service accounts %s", describe(sa))
			}
		},
	},
	{
		name: "prefix delegation",
		file: "prefix-delegation.yaml",
		want: want{criDir: containerdDir, nodeAgent: true, env: withEnv(map[string]string{
			"ENABLE_PREFIX_DELEGATION": "true",
			"WARM_PREFIX_TARGET":       "2",
			"MINIMUM_IP_TARGET":        "16",
			"WARM_ENI_TARGET":          "0",
		})},
		check: func(t *testing.T, r *rendered) {
			agent := container(t, r.daemonSet.Spec.Template.Spec.Containers, "aws-eks-nodeagent")
			if !contains(agent.Args, "--conntrack-cache-table-size=1048576") {
				t.Errorf("large numbers must render as integers: %v", agent.Args)
			}
		},
	},
	{
		name: "IPv6",
		file: "ipv6.yaml",
		want: want{criDir: containerdDir, nodeAgent: true, initIPv6: true, env: withEnv(map[string]string{
			"ENABLE_IPv6":              "true",
			"ENABLE_IPv4":              "false",
			"ENABLE_PREFIX_DELEGATION": "true",
			"WARM_PREFIX_TARGET":       "1",
			"ENABLE_V4_EGRESS":         "true",
		})},
		check: checkIPv6,
	},
	{
		name: "custom networking",
		file: "custom-networking.yaml",
		want: want{criDir: containerdDir, nodeAgent: true, env: withEnv(map[string]string{
			"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "true",
			"AWS_VPC_K8S_CNI_EXTERNALSNAT":       "true",
			"ENI_CONFIG_LABEL_DEF":               "topology.kubernetes.io/zone",
		})},
		check: func(t *testing.T, r *rendered) {
			got := map[string]string{}
			for _, ec := range r.eniConfigs {
				got[ec.Name] = ec.Spec.Subnet + " " + strings.Join(ec.Spec.SecurityGroups, ",")
				if ec.Namespace != "" {
					t.Errorf("ENIConfig %s is cluster-scoped, has namespace %q", ec.Name, ec.Namespace)
				}
			}
			want := map[string]string{
				"eu-west-1a": "subnet-0aaaaaaaaaaaaaaa1 sg-0bbbbbbbbbbbbbbb1,sg-0bbbbbbbbbbbbbbb2",
				"eu-west-1b": "subnet-0aaaaaaaaaaaaaaa2 ",
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ENIConfigs %v, want %v", got, want)
			}
			if a := r.serviceAccounts[0].Annotations["eks.amazonaws.com/role-arn"]; a != "arn:aws:iam::111122223333:role/aws-node-irsa" {
				t.Errorf("IRSA annotation %q", a)
			}
			want0 := "602401143452.dkr.ecr.eu-west-1.amazonaws.com/amazon-k8s-cni:v1.23.1"
			if img := r.awsNode(t).Image; img != want0 {
				t.Errorf("image %s, want %s", img, want0)
			}
		},
	},
	{
		name: "CRI-O socket",
		file: "crio.yaml",
		want: want{criDir: crioDir, nodeAgent: true, env: withEnv(map[string]string{
			"CRI_RUNTIME_ENDPOINT": "unix://" + crioSocket,
		})},
		check: func(t *testing.T, r *rendered) {
			for _, d := range r.docs {
				if strings.Contains(d.Content, "containerd") {
					t.Errorf("%s still names containerd", d.Source)
				}
			}
		},
	},
	{
		// criSocket.enabled=false alone: no endpoint and mode off.
		name: "reconciler off",
		file: "reconciler-off.yaml",
		want: want{nodeAgent: true, env: withEnv(map[string]string{
			"POD_IP_RECONCILE_MODE": "off",
			"CRI_RUNTIME_ENDPOINT":  "",
		})},
	},
	{
		name: "reconciler report",
		file: "reconciler-report.yaml",
		want: want{criDir: containerdDir, nodeAgent: true, env: withEnv(map[string]string{
			"POD_IP_RECONCILE_MODE":                 "report",
			"POD_IP_RECONCILE_INTERVAL":             "2m",
			"POD_IP_RECONCILE_GRACE_PERIOD":         "10m",
			"POD_IP_RECONCILE_MAX_RELEASE_PER_PASS": "5",
		})},
	},
	{
		name: "CNI 1.1.0 conflist",
		file: "cni-1.1.yaml",
		want: want{criDir: containerdDir, nodeAgent: true, env: withEnv(map[string]string{
			"AWS_VPC_CNI_CONFLIST_CNI_VERSION": "1.1.0",
		})},
	},
	{
		name: "no node agent",
		file: "no-node-agent.yaml",
		want: want{criDir: containerdDir, podsPatch: true, env: withEnv(map[string]string{
			"NETWORK_POLICY_ENFORCING_MODE": "",
			"ANNOTATE_POD_IP":               "true",
		})},
		check: func(t *testing.T, r *rendered) {
			if volume(r.daemonSet, "bpf-pin-path") != nil {
				t.Errorf("bpf-pin-path volume without the node agent")
			}
		},
	},
	{
		name: "own conflist",
		file: "cni-config.yaml",
		// cniVersion is set in the file but must not reach the env.
		want: want{criDir: containerdDir, nodeAgent: true, env: defaultEnv},
		check: func(t *testing.T, r *rendered) {
			cm := r.configMaps["aws-node"]
			if cm == nil {
				t.Fatalf("no ConfigMap aws-node")
			}
			vals := valuesFile(t, "cni-config.yaml")
			contents := vals["cniConfig"].(map[string]interface{})["fileContents"].(string)
			if got := string(cm.BinaryData["10-aws.conflist"]); got != contents {
				t.Errorf("conflist in ConfigMap\n%s\nwant\n%s", got, contents)
			}
			if len(cm.Data) != 0 || len(cm.BinaryData) != 1 {
				t.Errorf("ConfigMap aws-node has other keys: %s", describe(cm))
			}
			v := volume(r.daemonSet, "cni-config")
			if v == nil || v.ConfigMap == nil || v.ConfigMap.Name != "aws-node" ||
				len(v.ConfigMap.Items) != 1 || v.ConfigMap.Items[0].Key != "10-aws.conflist" {
				t.Fatalf("cni-config volume %s", describe(v))
			}
			m := mount(r.awsNode(t), "cni-config")
			if m == nil || m.MountPath != "/app/10-aws.conflist" || m.SubPath != "10-aws.conflist" || !m.ReadOnly {
				t.Errorf("cni-config mount %s", describe(m))
			}
		},
	},
	{
		name: "operations",
		file: "operations.yaml",
		want: want{criDir: containerdDir, nodeAgent: true, extraEnv: 1, env: withEnv(map[string]string{
			"ANNOTATE_POD_IP": "false",
		})},
		check: func(t *testing.T, r *rendered) {
			spec := r.daemonSet.Spec.Template.Spec
			if got := r.awsNode(t).Image; got != "registry.example.com/mirror/amazon-k8s-cni:v1.23.1-leakfix.0" {
				t.Errorf("override image %s", got)
			}
			if got := container(t, spec.InitContainers, "aws-vpc-cni-init").Image; got != "registry.example.com/mirror/amazon-k8s-cni-init:"+appVersion {
				t.Errorf("overrideRepository image %s", got)
			}
			if len(spec.ImagePullSecrets) != 1 || spec.ImagePullSecrets[0].Name != "mirror-pull" {
				t.Errorf("imagePullSecrets %v", spec.ImagePullSecrets)
			}
			meta := r.daemonSet.Spec.Template.ObjectMeta
			if meta.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] != "false" || meta.Labels["team"] != "networking" {
				t.Errorf("pod metadata %s", describe(meta))
			}
			if spec.NodeSelector["node.kubernetes.io/lifecycle"] != "normal" {
				t.Errorf("nodeSelector %v", spec.NodeSelector)
			}
			if mu := r.daemonSet.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable; mu == nil || *mu != intstr.FromInt32(1) {
				t.Errorf("maxUnavailable %v", mu)
			}
			env := r.awsNode(t).Env
			cn := env[len(env)-3]
			if cn.Name != "CLUSTER_NAME" || cn.ValueFrom == nil || cn.ValueFrom.ConfigMapKeyRef == nil {
				t.Errorf("extraEnv entry %s, want CLUSTER_NAME from a ConfigMap just before MY_NODE_NAME", describe(cn))
			}
			if m := mount(r.awsNode(t), "host-tmp"); m == nil || m.MountPath != "/host/tmp/aws-node" {
				t.Errorf("extra mount %s", describe(m))
			}
			ic := container(t, spec.InitContainers, "aws-vpc-cni-init")
			if m := mount(ic, "host-tmp"); m == nil || m.MountPath != "/host/tmp/aws-node" {
				t.Errorf("extraVolumeMounts must reach the init container: %s", describe(ic.VolumeMounts))
			}
			// init and the node agent take resources when their own are empty.
			for _, c := range []*corev1.Container{ic, container(t, spec.Containers, "aws-eks-nodeagent")} {
				if c.Resources.Requests.Cpu().String() != "50m" || c.Resources.Requests.Memory().String() != "64Mi" {
					t.Errorf("%s resources %s, want the aws-node container's", c.Name, describe(c.Resources))
				}
			}
			if v := volume(r.daemonSet, "host-tmp"); v == nil || v.HostPath == nil || v.HostPath.Path != "/tmp/aws-node" {
				t.Errorf("extra volume %s", describe(v))
			}
			if len(r.podMonitors) != 1 {
				t.Fatalf("%d PodMonitors", len(r.podMonitors))
			}
			pm := r.podMonitors[0]
			if pm.Spec.JobLabel != "aws-node" {
				t.Errorf("PodMonitor jobLabel %q, want the full name aws-node (upstream)", pm.Spec.JobLabel)
			}
			if pm.Labels["release"] != "prometheus" || pm.Spec.Selector.MatchLabels["k8s-app"] != "aws-node" ||
				!reflect.DeepEqual(pm.Spec.NamespaceSelector.MatchNames, []string{namespace}) {
				t.Errorf("PodMonitor %s", describe(pm))
			}
			var ports []string
			for _, e := range pm.Spec.PodMetricsEndpoints {
				ports = append(ports, e.Port)
				if e.Path != "/metrics" || e.Interval != "15s" || e.ScrapeTimeout != "10s" || len(e.Relabelings) != 1 {
					t.Errorf("PodMonitor endpoint %s", describe(e))
				}
			}
			if !reflect.DeepEqual(ports, []string{"metrics", "agentmetrics"}) {
				t.Errorf("PodMonitor ports %v", ports)
			}
		},
	},
}

func TestChartRenders(t *testing.T) {
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vals := valuesFile(t, tc.file)
			r := renderObjects(t, vals)
			checkCommon(t, r, tc.want, vals)
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// checkCommon checks what holds for every values file.
func checkCommon(t *testing.T, r *rendered, w want, vals map[string]interface{}) {
	ds := r.daemonSet
	spec := ds.Spec.Template.Spec

	if ds.Name != "aws-node" || ds.Namespace != namespace {
		t.Errorf("DaemonSet %s/%s, want %s/aws-node", ds.Namespace, ds.Name, namespace)
	}
	for _, o := range r.namespacedInRelease {
		if o.GetNamespace() != namespace {
			t.Errorf("%s has namespace %q, want %q", o.GetName(), o.GetNamespace(), namespace)
		}
	}
	if !spec.HostNetwork {
		t.Errorf("hostNetwork is off")
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g != 10 {
		t.Errorf("terminationGracePeriodSeconds %v, want 10", g)
	}
	if spec.ServiceAccountName != "aws-node" {
		t.Errorf("serviceAccountName %q", spec.ServiceAccountName)
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Errorf("selector %v: %v", ds.Spec.Selector, err)
	} else if !selectorMatches(ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels) {
		t.Errorf("selector %v does not match pod labels %v", ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
	}
	if ds.Spec.Template.Labels["k8s-app"] != "aws-node" {
		t.Errorf("pod label k8s-app missing: %v", ds.Spec.Template.Labels)
	}

	// Containers: aws-node, and the node agent when enabled; nothing else.
	var names []string
	for _, c := range spec.Containers {
		names = append(names, c.Name)
	}
	wantNames := []string{"aws-node"}
	if w.nodeAgent {
		wantNames = append(wantNames, "aws-eks-nodeagent")
	}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("containers %v, want %v", names, wantNames)
	}

	checkInit(t, r, w)
	checkAWSNode(t, r, w)
	checkVolumes(t, r, w)
	checkRBAC(t, r, w)
	checkConfigMap(t, r)
	checkCRD(t, r)
}

func checkInit(t *testing.T, r *rendered, w want) {
	ics := r.daemonSet.Spec.Template.Spec.InitContainers
	if len(ics) != 1 {
		t.Fatalf("%d init containers, want 1", len(ics))
	}
	ic := container(t, ics, "aws-vpc-cni-init")
	if got := envValues(ic); !reflect.DeepEqual(got, map[string]string{"DISABLE_TCP_EARLY_DEMUX": "false", "ENABLE_IPv6": strconv.FormatBool(w.initIPv6)}) {
		t.Errorf("init env %v", got)
	}
	if !sort.StringsAreSorted(envNames(ic)) {
		t.Errorf("init env not sorted: %v", envNames(ic))
	}
	if len(ic.VolumeMounts) < 1 || ic.VolumeMounts[0].Name != "cni-bin-dir" || ic.VolumeMounts[0].MountPath != "/host/opt/cni/bin" {
		t.Errorf("init mounts %s", describe(ic.VolumeMounts))
	}
	if ic.SecurityContext == nil || ic.SecurityContext.Privileged == nil || !*ic.SecurityContext.Privileged {
		t.Errorf("init container must be privileged (it writes sysctls): %s", describe(ic.SecurityContext))
	}
}

func checkAWSNode(t *testing.T, r *rendered, w want) {
	c := r.awsNode(t)

	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 61678 || c.Ports[0].Name != "metrics" {
		t.Errorf("ports %s, want 61678 named metrics", describe(c.Ports))
	}
	for _, p := range []struct {
		name         string
		probe        *corev1.Probe
		delay, tmout int32
	}{
		{"liveness", c.LivenessProbe, 60, 10},
		{"readiness", c.ReadinessProbe, 1, 10},
	} {
		if p.probe == nil || p.probe.Exec == nil {
			t.Errorf("%s probe %s is not exec", p.name, describe(p.probe))
			continue
		}
		if !reflect.DeepEqual(p.probe.Exec.Command, probeCommand) {
			t.Errorf("%s probe command %v, want %v", p.name, p.probe.Exec.Command, probeCommand)
		}
		if p.probe.InitialDelaySeconds != p.delay || p.probe.TimeoutSeconds != p.tmout {
			t.Errorf("%s probe delay %d timeout %d, want %d and %d", p.name, p.probe.InitialDelaySeconds, p.probe.TimeoutSeconds, p.delay, p.tmout)
		}
	}

	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatalf("aws-node securityContext %s", describe(sc))
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("aws-node must not be privileged")
	}
	if !reflect.DeepEqual(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "NET_RAW"}) || len(sc.Capabilities.Drop) != 0 {
		t.Errorf("aws-node capabilities %s, want add NET_ADMIN, NET_RAW", describe(sc.Capabilities))
	}

	// Env: values' env sorted by name, extraEnv, MY_NODE_NAME, MY_POD_NAME.
	env := c.Env
	if len(env) < 2+w.extraEnv {
		t.Fatalf("env too short: %v", envNames(c))
	}
	seen := map[string]bool{}
	for _, e := range env {
		if seen[e.Name] {
			t.Errorf("env %s twice", e.Name)
		}
		seen[e.Name] = true
	}
	fromValues := env[:len(env)-2-w.extraEnv]
	got := map[string]string{}
	var order []string
	for _, e := range fromValues {
		if e.ValueFrom != nil {
			t.Errorf("env %s from values has valueFrom", e.Name)
		}
		got[e.Name] = e.Value
		order = append(order, e.Name)
	}
	if !sort.StringsAreSorted(order) {
		t.Errorf("env from values not sorted: %v", order)
	}
	if !reflect.DeepEqual(got, w.env) {
		for k, v := range w.env {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("env %s = %q (present %v), want %q", k, g, ok, v)
			}
		}
		for k, v := range got {
			if _, ok := w.env[k]; !ok {
				t.Errorf("unexpected env %s = %q", k, v)
			}
		}
	}
	for i, f := range []struct{ name, path string }{{"MY_NODE_NAME", "spec.nodeName"}, {"MY_POD_NAME", "metadata.name"}} {
		e := env[len(env)-2+i]
		if e.Name != f.name || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != f.path {
			t.Errorf("env[%d] %s, want %s from fieldRef %s", len(env)-2+i, describe(e), f.name, f.path)
		}
	}

	// Mounts of the upstream table.
	for _, m := range []struct{ name, path string }{
		{"cni-bin-dir", "/host/opt/cni/bin"},
		{"cni-net-dir", "/host/etc/cni/net.d"},
		{"log-dir", "/host/var/log/aws-routed-eni"},
		{"run-dir", "/var/run/aws-node"},
		{"xtables-lock", "/run/xtables.lock"},
	} {
		if got := mount(c, m.name); got == nil || got.MountPath != m.path || got.ReadOnly {
			t.Errorf("aws-node mount %s: %s, want %s read-write", m.name, describe(got), m.path)
		}
	}
	// The runtime's socket directory, read-only at the same path, never the
	// socket file (a runtime restart replaces the file); the endpoint lies
	// inside it. Without it, no endpoint and the reconciler off.
	cri := mount(c, "cri-socket-dir")
	switch {
	case w.criDir == "" && cri != nil:
		t.Errorf("runtime socket directory mounted though disabled: %s", describe(cri))
	case w.criDir != "" && (cri == nil || cri.MountPath != w.criDir || !cri.ReadOnly || cri.SubPath != ""):
		t.Errorf("runtime socket directory mount %s, want %s read-only", describe(cri), w.criDir)
	}
	if mount(c, "cri-socket") != nil {
		t.Errorf("the runtime socket file is still mounted (volume cri-socket)")
	}
	vals := envValues(c)
	endpoint, hasEndpoint := vals["CRI_RUNTIME_ENDPOINT"]
	switch {
	case w.criDir == "" && hasEndpoint:
		t.Errorf("CRI_RUNTIME_ENDPOINT %q without a mounted runtime", endpoint)
	case w.criDir == "" && vals["POD_IP_RECONCILE_MODE"] != "off":
		t.Errorf("POD_IP_RECONCILE_MODE %q without a mounted runtime, want off", vals["POD_IP_RECONCILE_MODE"])
	case w.criDir != "" && endpoint != "" && !strings.HasPrefix(strings.TrimPrefix(endpoint, "unix://"), w.criDir+"/"):
		t.Errorf("CRI_RUNTIME_ENDPOINT %q is not inside the mounted %s", endpoint, w.criDir)
	}
}

func checkVolumes(t *testing.T, r *rendered, w want) {
	ds := r.daemonSet
	spec := ds.Spec.Template.Spec
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	fileOrCreate := corev1.HostPathFileOrCreate
	hostPaths := []struct {
		name string
		path string
		typ  *corev1.HostPathType
	}{
		{"cni-bin-dir", "/opt/cni/bin", nil},
		{"cni-net-dir", "/etc/cni/net.d", nil},
		{"log-dir", "/var/log/aws-routed-eni", &dirOrCreate},
		{"run-dir", "/var/run/aws-node", &dirOrCreate},
		{"xtables-lock", "/run/xtables.lock", &fileOrCreate},
	}
	if w.nodeAgent {
		hostPaths = append(hostPaths, struct {
			name string
			path string
			typ  *corev1.HostPathType
		}{"bpf-pin-path", "/sys/fs/bpf", nil})
	}
	if w.criDir != "" {
		// DirectoryOrCreate: a node without this runtime still runs aws-node.
		hostPaths = append(hostPaths, struct {
			name string
			path string
			typ  *corev1.HostPathType
		}{"cri-socket-dir", w.criDir, &dirOrCreate})
	} else if v := volume(ds, "cri-socket-dir"); v != nil {
		t.Errorf("cri-socket-dir volume though disabled: %s", describe(v))
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathSocket {
			t.Errorf("volume %s mounts a socket file (type Socket): %s", v.Name, describe(v))
		}
	}
	for _, hp := range hostPaths {
		v := volume(ds, hp.name)
		if v == nil || v.HostPath == nil || v.HostPath.Path != hp.path || !reflect.DeepEqual(v.HostPath.Type, hp.typ) {
			t.Errorf("volume %s: %s, want hostPath %s type %v", hp.name, describe(v), hp.path, describe(hp.typ))
		}
	}
	// Every mount names a volume of the pod; volume names are unique.
	vols := map[string]bool{}
	for _, v := range spec.Volumes {
		if vols[v.Name] {
			t.Errorf("volume %s twice", v.Name)
		}
		vols[v.Name] = true
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if !vols[m.Name] {
				t.Errorf("container %s mounts %s, which is not a volume", c.Name, m.Name)
			}
		}
	}
	if w.nodeAgent {
		agent := container(t, spec.Containers, "aws-eks-nodeagent")
		for _, m := range []struct{ name, path string }{
			{"cni-bin-dir", "/host/opt/cni/bin"},
			{"bpf-pin-path", "/sys/fs/bpf"},
			{"log-dir", "/var/log/aws-routed-eni"},
			{"run-dir", "/var/run/aws-node"},
		} {
			if got := mount(agent, m.name); got == nil || got.MountPath != m.path {
				t.Errorf("node agent mount %s: %s, want %s", m.name, describe(got), m.path)
			}
		}
		if mount(agent, "cri-socket-dir") != nil {
			t.Errorf("node agent must not see the runtime socket")
		}
	}
}

// allowedRules are the only grants aws-node may have: what its processes
// call (see the ClusterRole's comment). pods patch only with ANNOTATE_POD_IP;
// network-policy entries only with the node agent.
var allowedRules = map[string][]string{
	"crd.k8s.amazonaws.com/eniconfigs":                 {"get"},
	"/pods":                                            {"get", "list", "watch", "patch"},
	"/nodes":                                           {"get", "watch"},
	"vpcresources.k8s.aws/cninodes":                    {"get", "list", "watch", "patch"},
	"events.k8s.io/events":                             {"create", "patch"},
	"networking.k8s.aws/policyendpoints":               {"get", "list", "watch"},
	"networking.k8s.aws/clusterpolicyendpoints":        {"get", "list", "watch"},
	"networking.k8s.aws/policyendpoints/status":        {"get"},
	"networking.k8s.aws/clusterpolicyendpoints/status": {"get"},
	"url:/apis/networking.k8s.aws":                     {"get"},
	"url:/apis/networking.k8s.aws/*":                   {"get"},
}

func grants(rules []rbacv1.PolicyRule) map[string]map[string]bool {
	g := map[string]map[string]bool{}
	add := func(key string, verbs []string) {
		if g[key] == nil {
			g[key] = map[string]bool{}
		}
		for _, v := range verbs {
			g[key][v] = true
		}
	}
	for _, rule := range rules {
		for _, u := range rule.NonResourceURLs {
			add("url:"+u, rule.Verbs)
		}
		for _, grp := range rule.APIGroups {
			for _, res := range rule.Resources {
				add(grp+"/"+res, rule.Verbs)
			}
		}
	}
	return g
}

func checkRBAC(t *testing.T, r *rendered, w want) {
	cr, crb := r.clusterRole, r.clusterRoleBinding
	if cr == nil || crb == nil {
		t.Fatalf("ClusterRole or ClusterRoleBinding missing")
	}
	if cr.Name != "aws-node" || crb.Name != "aws-node" {
		t.Errorf("RBAC names %s, %s", cr.Name, crb.Name)
	}
	for _, rule := range cr.Rules {
		for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.NonResourceURLs} {
			if contains(list, "*") {
				t.Errorf("wildcard in rule %s", describe(rule))
			}
		}
		if len(rule.ResourceNames) != 0 {
			t.Errorf("unexpected resourceNames in %s", describe(rule))
		}
	}
	g := grants(cr.Rules)
	for key, verbs := range g {
		allowed, ok := allowedRules[key]
		if !ok {
			t.Errorf("ClusterRole grants %s, which aws-node does not need", key)
			continue
		}
		for v := range verbs {
			if !contains(allowed, v) {
				t.Errorf("ClusterRole grants %s on %s", v, key)
			}
		}
	}
	need := map[string][]string{
		"/pods":                            {"get", "list", "watch"},
		"crd.k8s.amazonaws.com/eniconfigs": {"get"},
		"/nodes":                           {"get", "watch"},
		"events.k8s.io/events":             {"create", "patch"},
		"vpcresources.k8s.aws/cninodes":    {"get", "list", "watch", "patch"},
	}
	for key, verbs := range need {
		for _, v := range verbs {
			if !g[key][v] {
				t.Errorf("ClusterRole lacks %s on %s", v, key)
			}
		}
	}
	if g["/pods"]["patch"] != w.podsPatch {
		t.Errorf("pods patch granted = %v, want %v (ANNOTATE_POD_IP)", g["/pods"]["patch"], w.podsPatch)
	}
	_, hasPolicy := g["networking.k8s.aws/policyendpoints"]
	_, hasURL := g["url:/apis/networking.k8s.aws"]
	if hasPolicy != w.nodeAgent || hasURL != w.nodeAgent {
		t.Errorf("network-policy grants present = %v/%v, want %v (node agent)", hasPolicy, hasURL, w.nodeAgent)
	}
	if crb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: cr.Name}) {
		t.Errorf("roleRef %s", describe(crb.RoleRef))
	}
	if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "aws-node", Namespace: namespace}}; !reflect.DeepEqual(crb.Subjects, want) {
		t.Errorf("subjects %s", describe(crb.Subjects))
	}
}

func checkConfigMap(t *testing.T, r *rendered) {
	cm := r.configMaps["amazon-vpc-cni"]
	if cm == nil {
		t.Fatalf("no ConfigMap amazon-vpc-cni")
	}
	want := map[string]string{
		"enable-windows-ipam":              "false",
		"enable-network-policy-controller": "false",
		"enable-windows-prefix-delegation": "false",
		"warm-prefix-target":               "0",
		"warm-ip-target":                   "1",
		"minimum-ip-target":                "3",
		"branch-eni-cooldown":              "60",
	}
	if !reflect.DeepEqual(cm.Data, want) {
		t.Errorf("amazon-vpc-cni data %v, want %v", cm.Data, want)
	}
}

func checkCRD(t *testing.T, r *rendered) {
	if len(r.crds) != 1 {
		t.Fatalf("%d CRDs, want 1", len(r.crds))
	}
	crd := r.crds[0]
	if crd.Name != "eniconfigs.crd.k8s.amazonaws.com" || crd.Spec.Group != "crd.k8s.amazonaws.com" ||
		crd.Spec.Scope != apiextv1.ClusterScoped || crd.Spec.Names.Kind != "ENIConfig" || crd.Spec.Names.Plural != "eniconfigs" {
		t.Errorf("CRD %s", describe(crd.ObjectMeta))
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("CRD versions %d", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1alpha1" || !v.Served || !v.Storage || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		t.Fatalf("CRD version %s", describe(v))
	}
	root := v.Schema.OpenAPIV3Schema
	if root.XPreserveUnknownFields == nil || !*root.XPreserveUnknownFields {
		t.Errorf("CRD must preserve unknown fields")
	}
	spec := root.Properties["spec"]
	if !contains(spec.Required, "subnet") || spec.Properties["subnet"].Type != "string" ||
		spec.Properties["securityGroups"].Items == nil || spec.Properties["securityGroups"].Items.Schema.Type != "string" {
		t.Errorf("CRD spec schema %s", describe(spec))
	}
}

func checkDefaultAffinity(t *testing.T, a *corev1.Affinity) {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatalf("affinity %s", describe(a))
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	want := []corev1.NodeSelectorRequirement{
		{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
		{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"}},
		{Key: "eks.amazonaws.com/compute-type", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"fargate", "hybrid", "auto"}},
	}
	if len(terms) != 1 || !reflect.DeepEqual(terms[0].MatchExpressions, want) {
		t.Errorf("node affinity %s", describe(terms))
	}
}

func selectorMatches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Settings that cannot work fail at render time with a message naming the
// value to fix.
func TestChartRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]interface{}
		want string
	}{
		{
			name: "cniConfig without contents",
			vals: map[string]interface{}{"cniConfig": map[string]interface{}{"enabled": true}},
			want: "cniConfig.enabled needs cniConfig.fileContents",
		},
		{
			name: "cniConfig not JSON",
			vals: map[string]interface{}{"cniConfig": map[string]interface{}{"enabled": true, "fileContents": "cniVersion: 1.1.0"}},
			want: "cniConfig.fileContents is not a JSON object",
		},
		{
			name: "cniVersion not a version",
			vals: map[string]interface{}{"cniVersion": "latest"},
			want: `cniVersion "latest"`,
		},
		{
			name: "reconciler enforcing without the runtime",
			vals: map[string]interface{}{
				"criSocket": map[string]interface{}{"enabled": false},
				"env":       map[string]interface{}{"POD_IP_RECONCILE_MODE": "enforce"},
			},
			want: "env.POD_IP_RECONCILE_MODE=enforce needs the container runtime socket, but criSocket.enabled is false",
		},
		{
			name: "reconciler reporting without the runtime",
			vals: map[string]interface{}{
				"criSocket": map[string]interface{}{"enabled": false},
				"env":       map[string]interface{}{"POD_IP_RECONCILE_MODE": "Report"},
			},
			want: "env.POD_IP_RECONCILE_MODE=report needs the container runtime socket, but criSocket.enabled is false",
		},
		{
			name: "endpoint outside the mounted directory",
			vals: map[string]interface{}{
				"criSocket": map[string]interface{}{"hostDir": crioDir, "socket": "crio.sock"},
				"env":       map[string]interface{}{"CRI_RUNTIME_ENDPOINT": "unix://" + containerdSocket},
			},
			want: `env.CRI_RUNTIME_ENDPOINT "unix:///run/containerd/containerd.sock" is outside the mounted socket directory "/var/run/crio"`,
		},
		{
			name: "bare endpoint path outside the mounted directory",
			vals: map[string]interface{}{"env": map[string]interface{}{"CRI_RUNTIME_ENDPOINT": "/run/containerd-other/containerd.sock"}},
			want: "is outside the mounted socket directory",
		},
		{
			name: "unix: endpoint outside the mounted directory",
			vals: map[string]interface{}{"env": map[string]interface{}{"CRI_RUNTIME_ENDPOINT": "unix:/run/k3s/containerd/containerd.sock"}},
			want: "is outside the mounted socket directory",
		},
		{
			name: "socket path too long for Linux",
			vals: map[string]interface{}{"criSocket": map[string]interface{}{"hostDir": "/run/" + strings.Repeat("d", 100)}},
			want: "the socket path is longer than the 107 bytes Linux allows",
		},
		{
			name: "relative socket directory",
			vals: map[string]interface{}{"criSocket": map[string]interface{}{"hostDir": "run/containerd"}},
			want: `criSocket.hostDir "run/containerd", criSocket.socket "containerd.sock": the socket directory "run/containerd" must be an absolute, clean path`,
		},
		{
			name: "socket directory too shallow",
			vals: map[string]interface{}{"criSocket": map[string]interface{}{"hostDir": "/run"}},
			want: "at least two levels deep",
		},
		{
			name: "socket directory over aws-node's run dir",
			vals: map[string]interface{}{"criSocket": map[string]interface{}{"hostDir": "/var/run", "socket": "dockershim.sock"}},
			want: `the socket directory "/var/run" overlaps aws-node's own mount /var/run/aws-node`,
		},
		{
			name: "socket directory under aws-node's run dir, through /run",
			vals: map[string]interface{}{"criSocket": map[string]interface{}{"hostDir": "/run/aws-node/cri"}},
			want: "overlaps aws-node's own mount /var/run/aws-node",
		},
		{
			name: "socket is a path",
			vals: map[string]interface{}{"criSocket": map[string]interface{}{"socket": "containerd/containerd.sock"}},
			want: "the socket must be a file name inside the directory",
		},
		{
			// A socket straight under /run would mount all of /run.
			name: "old hostPath whose directory is too broad",
			vals: map[string]interface{}{"criSocket": map[string]interface{}{"hostPath": "/run/cri-dockerd.sock"}},
			want: `criSocket.hostPath "/run/cri-dockerd.sock": the socket directory "/run" must be`,
		},
		{
			name: "extraEnv repeats a rendered variable",
			vals: map[string]interface{}{"extraEnv": []interface{}{
				map[string]interface{}{"name": "CRI_RUNTIME_ENDPOINT", "value": "unix:///run/containerd/containerd.sock"},
			}},
			want: "extraEnv CRI_RUNTIME_ENDPOINT: the chart already sets it",
		},
		{
			name: "ENIConfig without subnet",
			vals: map[string]interface{}{"eniConfig": map[string]interface{}{
				"create":  true,
				"subnets": map[string]interface{}{"a": map[string]interface{}{"securityGroups": []interface{}{"sg-1"}}},
			}},
			want: "eniConfig.subnets.a.id is required",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := renderDocs(t, tc.vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// The runtime socket: the directory that holds it is mounted, the endpoint
// is rendered from it unless env sets one, and chart 1.23.1-leakfix.0's
// criSocket.hostPath (a socket file) still works.
func TestCRISocket(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]interface{}
		want want
	}{
		{
			name: "another containerd directory",
			vals: map[string]interface{}{"criSocket": map[string]interface{}{"hostDir": "/run/k3s/containerd"}},
			want: want{criDir: "/run/k3s/containerd", nodeAgent: true, env: withEnv(map[string]string{
				"CRI_RUNTIME_ENDPOINT": "unix:///run/k3s/containerd/containerd.sock",
			})},
		},
		{
			name: "endpoint set in env wins",
			vals: map[string]interface{}{"env": map[string]interface{}{"CRI_RUNTIME_ENDPOINT": "unix:///run/containerd/cri.sock"}},
			want: want{criDir: containerdDir, nodeAgent: true, env: withEnv(map[string]string{
				"CRI_RUNTIME_ENDPOINT": "unix:///run/containerd/cri.sock",
			})},
		},
		{
			// Rendered empty, not replaced: ipamd then probes the usual sockets.
			name: "endpoint left to the probe",
			vals: map[string]interface{}{"env": map[string]interface{}{"CRI_RUNTIME_ENDPOINT": ""}},
			want: want{criDir: containerdDir, nodeAgent: true, env: withEmpty(defaultEnv, "CRI_RUNTIME_ENDPOINT")},
		},
		{
			name: "report mode with the runtime",
			vals: map[string]interface{}{"env": map[string]interface{}{"POD_IP_RECONCILE_MODE": "report"}},
			want: want{criDir: containerdDir, nodeAgent: true, env: withEnv(map[string]string{"POD_IP_RECONCILE_MODE": "report"})},
		},
		{
			// An endpoint is meaningless without the mount, and off is what
			// the user asked for anyway.
			name: "disabled, with an endpoint and mode off",
			vals: map[string]interface{}{
				"criSocket": map[string]interface{}{"enabled": false},
				"env":       map[string]interface{}{"POD_IP_RECONCILE_MODE": "off", "CRI_RUNTIME_ENDPOINT": "unix://" + containerdSocket},
			},
			want: want{nodeAgent: true, env: withEnv(map[string]string{"POD_IP_RECONCILE_MODE": "off", "CRI_RUNTIME_ENDPOINT": ""})},
		},
		{
			name: "old hostPath of a CRI-O node",
			vals: map[string]interface{}{
				"criSocket": map[string]interface{}{"hostPath": crioSocket},
				"env":       map[string]interface{}{"CRI_RUNTIME_ENDPOINT": "unix://" + crioSocket},
			},
			want: want{criDir: crioDir, nodeAgent: true, env: withEnv(map[string]string{"CRI_RUNTIME_ENDPOINT": "unix://" + crioSocket})},
		},
		{
			// helm upgrade --reuse-values keeps the old release's values,
			// defaults included, and drops the new chart's: no hostDir or
			// socket, the old hostPath and endpoint.
			name: "values of a 1.23.1-leakfix.0 release",
			vals: map[string]interface{}{
				"criSocket": map[string]interface{}{"enabled": true, "hostPath": containerdSocket, "hostDir": nil, "socket": nil},
				"env":       map[string]interface{}{"CRI_RUNTIME_ENDPOINT": "unix://" + containerdSocket, "POD_IP_RECONCILE_MODE": "enforce"},
			},
			want: want{criDir: containerdDir, nodeAgent: true, env: defaultEnv},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := renderObjects(t, tc.vals)
			checkCommon(t, r, tc.want, tc.vals)
		})
	}
}
