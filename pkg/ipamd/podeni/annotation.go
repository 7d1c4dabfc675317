package podeni

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Names upstream and the VPC resource controller agree on.
const (
	// ResourcePrefix starts the name of the extended resource a branch
	// pod requests (the controller's webhook sets the limit
	// vpc.amazonaws.com/pod-eni: 1).
	ResourcePrefix = "vpc.amazonaws.com/pod-eni"
	// Annotation holds the branch ENIs the controller attached for the
	// pod, a JSON array whose first element is used.
	Annotation = "vpc.amazonaws.com/pod-eni"
)

// ErrNotAnnotated: the pod asks for a branch ENI but the controller has not
// written the annotation yet (the runtime retries the ADD).
var ErrNotAnnotated = errors.New("pod has no " + Annotation + " annotation yet")

// ErrBadAnnotation: the annotation cannot be used; the error wrapping it
// says which part is wrong.
var ErrBadAnnotation = errors.New("bad " + Annotation + " annotation")

// Branch is one element of the annotation, with upstream ipamd's JSON
// keys. The controller writes vlanId where upstream declares vlanID:
// encoding/json matches keys without regard to case, so both read, and
// the decoding must stay case-insensitive.
type Branch struct {
	ENIID        string `json:"eniId"`
	MAC          string `json:"ifAddress"`
	IPv4         string `json:"privateIp"`
	IPv6         string `json:"ipv6Addr"`
	VLANID       int    `json:"vlanID"`
	SubnetCIDR   string `json:"subnetCidr"`
	SubnetV6CIDR string `json:"subnetV6Cidr"`
}

// ParseAnnotation reads the annotation's value: a JSON array of branches,
// of which the first is the pod's.
func ParseAnnotation(value string) (Branch, error) {
	var branches []Branch
	if err := json.Unmarshal([]byte(value), &branches); err != nil {
		return Branch{}, fmt.Errorf("%w: not a JSON array of branch ENIs: %v", ErrBadAnnotation, err)
	}
	if len(branches) == 0 {
		return Branch{}, fmt.Errorf("%w: the array is empty", ErrBadAnnotation)
	}
	return branches[0], nil
}
