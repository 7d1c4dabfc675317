package rpcserver

import (
	"fmt"
	"unicode/utf8"

	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// Field limits for requests. Real values are far below them (container IDs
// are 64 hex characters, interface names at most 15 bytes); anything longer
// is a broken or hostile client and is refused before it reaches the store.
const (
	maxIDLen      = 256
	maxIfNameLen  = 15 // IFNAMSIZ - 1
	maxK8sNameLen = 253
	maxNetnsLen   = 4096
)

// missingPrefix starts the reason of a required field left empty.
const missingPrefix = "missing_"

type field struct {
	name     string
	value    string
	required bool
	max      int
}

// validate returns a reason label (for the metric) and an error for the
// first field that is missing, too long or not UTF-8.
func validate(fields ...field) (string, error) {
	for _, f := range fields {
		switch {
		case f.required && f.value == "":
			return missingPrefix + f.name, fmt.Errorf("%s is required", f.name)
		case len(f.value) > f.max:
			return "too_long_" + f.name, fmt.Errorf("%s is %d bytes, at most %d allowed", f.name, len(f.value), f.max)
		case !utf8.ValidString(f.value):
			return "bad_utf8_" + f.name, fmt.Errorf("%s is not valid UTF-8", f.name)
		}
	}
	return "", nil
}

func keyFields(containerID, ifName, network string) [3]field {
	return [3]field{
		{"ContainerID", containerID, true, maxIDLen},
		{"IfName", ifName, true, maxIfNameLen},
		{"NetworkName", network, true, maxIDLen},
	}
}

func podFields(name, namespace, infraID string) [3]field {
	return [3]field{
		{"K8S_POD_NAME", name, false, maxK8sNameLen},
		{"K8S_POD_NAMESPACE", namespace, false, maxK8sNameLen},
		{"K8S_POD_INFRA_CONTAINER_ID", infraID, false, maxIDLen},
	}
}

// addFields are the fields of an ADD request, in the order they are
// checked. An array, so checking a request allocates nothing.
func addFields(in *rpc.AddNetworkRequest) [7]field {
	k := keyFields(in.ContainerID, in.IfName, in.NetworkName)
	p := podFields(in.K8S_POD_NAME, in.K8S_POD_NAMESPACE, in.K8S_POD_INFRA_CONTAINER_ID)
	return [7]field{k[0], k[1], k[2], p[0], p[1], p[2], {"Netns", in.Netns, false, maxNetnsLen}}
}

// delFields are the fields of a DEL request, in the order they are checked.
func delFields(in *rpc.DelNetworkRequest) [8]field {
	k := keyFields(in.ContainerID, in.IfName, in.NetworkName)
	p := podFields(in.K8S_POD_NAME, in.K8S_POD_NAMESPACE, in.K8S_POD_INFRA_CONTAINER_ID)
	return [8]field{k[0], k[1], k[2], p[0], p[1], p[2],
		{"Reason", in.Reason, false, maxIDLen}, {"K8S_POD_UID", in.K8S_POD_UID, false, maxIDLen}}
}
