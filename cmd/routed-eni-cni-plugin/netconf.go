package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/hostlock"
)

// Defaults of the netconf keys.
const (
	defaultVethPrefix     = "eni"
	defaultMTU            = 9001
	minMTU                = 576
	defaultSGMode         = string(driver.SGModeStrict)
	defaultLogFile        = "/var/log/aws-routed-eni/plugin.log"
	defaultLogLevel       = "Debug"
	defaultIPAMDSocket    = "/var/run/aws-node/ipamd.sock"
	maxVethPrefixLen      = 4
	multiNICAnnotation    = "k8s.amazonaws.com/nicConfig"
	multiNICAnnotationVal = "multi-nic-attachment"
)

// Bounds on the identifiers the runtime hands over (Kubernetes limits, plus
// what the DEL queue accepts as a file name).
const (
	maxPodNameLen     = 253
	maxNamespaceLen   = 63
	maxContainerIDLen = 200
	maxPodUIDLen      = 128
)

// NetConf is the plugin's stdin configuration: the standard CNI keys, the
// keys of upstream's conflist entry, and keys of ours for tests and
// unusual layouts (ipamdSocket, delQueueDir, addressLockDir).
type NetConf struct {
	CNIVersion       string               `json:"cniVersion,omitempty"`
	Name             string               `json:"name,omitempty"`
	Type             string               `json:"type,omitempty"`
	Capabilities     map[string]bool      `json:"capabilities,omitempty"`
	RawPrevResult    map[string]any       `json:"prevResult,omitempty"`
	ValidAttachments []types.GCAttachment `json:"cni.dev/valid-attachments,omitempty"`

	VethPrefix         string        `json:"vethPrefix"`
	MTU                string        `json:"mtu"`
	PodSGEnforcingMode string        `json:"podSGEnforcingMode"`
	PluginLogFile      string        `json:"pluginLogFile"`
	PluginLogLevel     string        `json:"pluginLogLevel"`
	RuntimeConfig      RuntimeConfig `json:"runtimeConfig"`

	IPAMDSocket    string `json:"ipamdSocket"`
	DelQueueDir    string `json:"delQueueDir"`
	AddressLockDir string `json:"addressLockDir"`

	// Derived values.
	podMTU     int
	prevResult *current.Result // nil when absent
	prevErr    error           // why prevResult could not be used
}

// RuntimeConfig holds the capability arguments the runtime injects.
type RuntimeConfig struct {
	PodAnnotations map[string]string `json:"io.kubernetes.cri.pod-annotations,omitempty"`
}

// loadNetConf decodes and validates stdin. A bad prevResult is not fatal
// here (DEL must still work); it is kept in prevErr for the verbs that need
// it.
func loadNetConf(data []byte) (*NetConf, *types.Error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, types.NewError(types.ErrDecodingFailure, "empty network configuration on stdin", "")
	}
	conf := &NetConf{}
	if err := json.Unmarshal(data, conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "failed to parse network configuration", err.Error())
	}
	if conf.Name == "" {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "network configuration has no name", "")
	}
	if conf.VethPrefix == "" {
		conf.VethPrefix = defaultVethPrefix
	}
	if len(conf.VethPrefix) > maxVethPrefixLen {
		return nil, types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("vethPrefix %q is longer than %d characters", conf.VethPrefix, maxVethPrefixLen), "")
	}
	if strings.ContainsAny(conf.VethPrefix, "/: \t\n") {
		return nil, types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("vethPrefix %q contains characters not allowed in an interface name", conf.VethPrefix), "")
	}
	if conf.PodSGEnforcingMode == "" {
		conf.PodSGEnforcingMode = defaultSGMode
	}
	if m := driver.SGMode(conf.PodSGEnforcingMode); m != driver.SGModeStrict && m != driver.SGModeStandard {
		return nil, types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("podSGEnforcingMode %q is neither strict nor standard", conf.PodSGEnforcingMode), "")
	}
	if conf.IPAMDSocket == "" {
		conf.IPAMDSocket = defaultIPAMDSocket
	}
	if conf.DelQueueDir == "" {
		conf.DelQueueDir = delqueue.DefaultDir
	}
	if conf.AddressLockDir == "" {
		conf.AddressLockDir = hostlock.DefaultDir
	}
	if conf.PluginLogFile == "" {
		conf.PluginLogFile = defaultLogFile
	}
	if conf.PluginLogLevel == "" {
		conf.PluginLogLevel = defaultLogLevel
	}
	conf.podMTU = podMTU(conf.MTU)
	if conf.RawPrevResult != nil {
		conf.prevResult, conf.prevErr = parsePrevResultJSON(conf.CNIVersion, conf.RawPrevResult)
	}
	return conf, nil
}

// podMTU parses the mtu key as upstream does: anything that is not an
// integer in [576, 9001] means 9001.
func podMTU(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < minMTU || n > defaultMTU {
		return defaultMTU
	}
	return n
}

// parsePrevResultJSON converts the raw prevResult to the current result type.
func parsePrevResultJSON(cniVersion string, raw map[string]any) (*current.Result, error) {
	pc := &types.PluginConf{CNIVersion: cniVersion, RawPrevResult: raw}
	if err := cniversion.ParsePrevResult(pc); err != nil {
		return nil, err
	}
	return current.NewResultFromResult(pc.PrevResult)
}

// multiNICRequested reports the pod annotation asking for one interface per
// network card.
func (c *NetConf) multiNICRequested() bool {
	return c.RuntimeConfig.PodAnnotations[multiNICAnnotation] == multiNICAnnotationVal
}

// PodArgs are the CNI_ARGS keys the plugin reads.
type PodArgs struct {
	types.CommonArgs
	K8S_POD_NAME               types.UnmarshallableString
	K8S_POD_NAMESPACE          types.UnmarshallableString
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString
	K8S_POD_UID                types.UnmarshallableString
}

// pod is the decoded identity of the pod.
type pod struct {
	Name, Namespace, InfraContainerID, UID string
}

func (p pod) String() string { return p.Namespace + "/" + p.Name }

// loadPodArgs parses CNI_ARGS. Unknown keys are an error unless the runtime
// sets IgnoreUnknown=1 (kubelet and containerd do). requireName is set for
// the verbs that build interface names from the pod (ADD, CHECK).
func loadPodArgs(s string, requireName bool) (pod, *types.Error) {
	var a PodArgs
	if err := types.LoadArgs(s, &a); err != nil {
		return pod{}, types.NewError(types.ErrInvalidEnvironmentVariables, "failed to parse CNI_ARGS", err.Error())
	}
	p := pod{
		Name:             string(a.K8S_POD_NAME),
		Namespace:        string(a.K8S_POD_NAMESPACE),
		InfraContainerID: string(a.K8S_POD_INFRA_CONTAINER_ID),
		UID:              string(a.K8S_POD_UID),
	}
	if requireName && (p.Name == "" || p.Namespace == "") {
		return pod{}, types.NewError(types.ErrInvalidEnvironmentVariables,
			"CNI_ARGS must carry K8S_POD_NAME and K8S_POD_NAMESPACE", "")
	}
	for _, f := range []struct {
		key, val string
		max      int
	}{
		{"K8S_POD_NAME", p.Name, maxPodNameLen},
		{"K8S_POD_NAMESPACE", p.Namespace, maxNamespaceLen},
		{"K8S_POD_INFRA_CONTAINER_ID", p.InfraContainerID, maxContainerIDLen},
		{"K8S_POD_UID", p.UID, maxPodUIDLen},
	} {
		if len(f.val) > f.max {
			return pod{}, types.NewError(types.ErrInvalidEnvironmentVariables,
				fmt.Sprintf("CNI_ARGS %s is %d characters long, at most %d allowed", f.key, len(f.val), f.max), "")
		}
		if strings.ContainsAny(f.val, "\x00\n\r") {
			return pod{}, types.NewError(types.ErrInvalidEnvironmentVariables,
				fmt.Sprintf("CNI_ARGS %s contains control characters", f.key), "")
		}
	}
	return p, nil
}

// checkContainerID bounds CNI_CONTAINERID (the runtime already checked its
// characters): it becomes part of ipamd's key and of a DEL-queue file name.
func checkContainerID(id string) *types.Error {
	if len(id) > maxContainerIDLen {
		return types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("CNI_CONTAINERID is %d characters long, at most %d allowed", len(id), maxContainerIDLen), "")
	}
	return nil
}
