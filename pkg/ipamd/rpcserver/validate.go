package rpcserver

import (
	"fmt"
	"unicode/utf8"
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

func keyFields(containerID, ifName, network string) []field {
	return []field{
		{"ContainerID", containerID, true, maxIDLen},
		{"IfName", ifName, true, maxIfNameLen},
		{"NetworkName", network, true, maxIDLen},
	}
}

func podFields(name, namespace, infraID string) []field {
	return []field{
		{"K8S_POD_NAME", name, false, maxK8sNameLen},
		{"K8S_POD_NAMESPACE", namespace, false, maxK8sNameLen},
		{"K8S_POD_INFRA_CONTAINER_ID", infraID, false, maxIDLen},
	}
}
