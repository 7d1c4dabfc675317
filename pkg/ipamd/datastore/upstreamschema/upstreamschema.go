// Package upstreamschema is upstream aws-node's checkpoint document
// (vpc-cni-ipam/1, /var/run/aws-node/ipam.json) written out field by field
// from the published schema, independently of the datastore's own codec.
// Tests decode what the datastore writes with it, and write with it what
// an upstream ipamd would leave behind, so that a drift of our codec from
// upstream's format shows. It is a leaf (encoding/json tags only) and only
// test files import it.
package upstreamschema

// Version is the schema version upstream writes and reads.
const Version = "vpc-cni-ipam/1"

// Doc is the whole checkpoint file.
type Doc struct {
	Version     string  `json:"version"`
	Allocations []Entry `json:"allocations"`
}

// Entry is one allocation.
type Entry struct {
	NetworkName         string   `json:"networkName"`
	ContainerID         string   `json:"containerID"`
	IfName              string   `json:"ifName"`
	IPv4                string   `json:"ipv4,omitempty"`
	IPv6                string   `json:"ipv6,omitempty"`
	AllocationTimestamp int64    `json:"allocationTimestamp"`
	Metadata            Metadata `json:"metadata"`
}

// Metadata is an allocation's pod metadata.
type Metadata struct {
	K8SPodNamespace string `json:"k8sPodNamespace,omitempty"`
	K8SPodName      string `json:"k8sPodName,omitempty"`
	InterfacesCount int    `json:"interfacesCount,omitempty"`
}

// AllocationKeys are the JSON keys an allocation may carry, and
// MetadataKeys those of its metadata (case-sensitive).
var (
	AllocationKeys = []string{"networkName", "containerID", "ifName", "ipv4", "ipv6", "allocationTimestamp", "metadata"}
	MetadataKeys   = []string{"k8sPodNamespace", "k8sPodName", "interfacesCount"}
)
