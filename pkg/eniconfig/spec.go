package eniconfig

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GVR is the ENIConfig resource (charts/aws-vpc-cni/crds).
var GVR = schema.GroupVersionResource{Group: "crd.k8s.amazonaws.com", Version: "v1alpha1", Resource: "eniconfigs"}

// Spec is what custom networking takes from an ENIConfig. SecurityGroups
// may be empty: the caller then uses the primary ENI's groups, as
// upstream does.
type Spec struct {
	Name           string
	Subnet         string
	SecurityGroups []string
}

// decodeSpec reads the spec of the object named name (as the dynamic
// client returns it) and checks it. Fields it does not know are ignored,
// as the CRD preserves them. Errors describe the field and the fix; the
// caller adds the object and node and wraps ErrInvalid.
func decodeSpec(name string, obj map[string]any) (Spec, error) {
	raw, ok := obj["spec"]
	if !ok || raw == nil {
		return Spec{}, fmt.Errorf("it has no spec: set spec.subnet to a subnet ID (subnet-...)")
	}
	spec, ok := raw.(map[string]any)
	if !ok {
		return Spec{}, fmt.Errorf("spec is %s, not an object: set spec.subnet and spec.securityGroups", jsonType(raw))
	}
	s := Spec{Name: name}
	switch v := spec["subnet"].(type) {
	case nil:
		return Spec{}, fmt.Errorf("spec.subnet is missing: set it to a subnet ID (subnet-...) in the node's availability zone")
	case string:
		if v == "" {
			return Spec{}, fmt.Errorf("spec.subnet is empty: set it to a subnet ID (subnet-...) in the node's availability zone")
		}
		if !wellFormedID(v, "subnet-") {
			return Spec{}, fmt.Errorf("spec.subnet %q is not a subnet ID: fix it to subnet- followed by lowercase letters and digits", v)
		}
		s.Subnet = v
	default:
		return Spec{}, fmt.Errorf("spec.subnet is %s, not a string: set it to a subnet ID (subnet-...)", jsonType(v))
	}
	switch v := spec["securityGroups"].(type) {
	case nil: // absent or null: the caller falls back to the primary ENI's groups
	case []any:
		for i, e := range v {
			sg, ok := e.(string)
			if !ok {
				return Spec{}, fmt.Errorf("spec.securityGroups[%d] is %s, not a string: list security group IDs (sg-...)", i, jsonType(e))
			}
			if !wellFormedID(sg, "sg-") {
				return Spec{}, fmt.Errorf("spec.securityGroups[%d] %q is not a security group ID: fix it to sg- followed by lowercase letters and digits", i, sg)
			}
			s.SecurityGroups = append(s.SecurityGroups, sg)
		}
	default:
		return Spec{}, fmt.Errorf("spec.securityGroups is %s, not a list: list security group IDs (sg-...)", jsonType(v))
	}
	return s, nil
}

// wellFormedID accepts prefix followed by lowercase letters and digits.
// Real IDs are hex, but the check stays looser than that (the EC2
// simulator's IDs are not hex): its job is to catch a missing prefix, an
// ID pasted into the wrong field, stray spaces or quotes, before EC2
// answers with a less helpful InvalidSubnetID.Malformed.
func wellFormedID(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// jsonType names the JSON type of a decoded value, with its article, for
// messages.
func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int32, int64, float32, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("a %T", v)
}
