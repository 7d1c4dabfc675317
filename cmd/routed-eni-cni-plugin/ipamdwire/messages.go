package ipamdwire

import (
	"errors"
	"strconv"
)

// The messages the plugin exchanges with ipamd, with rpc/rpc.proto's field
// names and numbers (only the reply fields the plugin reads are decoded;
// the others are skipped, as protobuf skips unknown fields).

// AddNetworkRequest is rpc.AddNetworkRequest.
type AddNetworkRequest struct {
	K8S_POD_NAME               string // 1
	K8S_POD_NAMESPACE          string // 2
	K8S_POD_INFRA_CONTAINER_ID string // 3
	Netns                      string // 4
	IfName                     string // 5
	NetworkName                string // 6
	ContainerID                string // 7
	ClientVersion              string // 8
	RequiresMultiNICAttachment bool   // 9
}

// IPAllocationMetadata is rpc.IPAllocationMetadata.
type IPAllocationMetadata struct {
	IPv4Addr     string // 1
	IPv6Addr     string // 2
	DeviceNumber int32  // 3
	RouteTableId int32  // 4
}

// AddNetworkReply is rpc.AddNetworkReply (fields 1, 2, 7-10 and 13).
type AddNetworkReply struct {
	Success              bool
	IPAllocationMetadata []*IPAllocationMetadata
	PodVlanId            int32  // 7
	PodENIMAC            string // 8
	PodENISubnetGW       string // 9
	ParentIfIndex        int32  // 10
	NetworkPolicyMode    string
	// FailureCause is not in the message: it is the AddFailureTrailer of a
	// reply with Success=false, ipamd's one line on why ("" from an ipamd
	// that sends none, such as upstream's).
	FailureCause string
}

// DelNetworkRequest is rpc.DelNetworkRequest.
type DelNetworkRequest struct {
	K8S_POD_NAME               string // 1
	K8S_POD_NAMESPACE          string // 2
	K8S_POD_INFRA_CONTAINER_ID string // 3
	Reason                     string // 5
	IfName                     string // 6
	NetworkName                string // 7
	ContainerID                string // 8
	ClientVersion              string // 9
	K8S_POD_UID                string // 10
}

// DelNetworkReply is rpc.DelNetworkReply (fields 1, 2, 4 and 6).
type DelNetworkReply struct {
	Success              bool
	IPAllocationMetadata []*IPAllocationMetadata
	PodVlanId            int32
	NetworkPolicyMode    string
}

// PoolStatusRequest is rpc.PoolStatusRequest.
type PoolStatusRequest struct {
	ClientVersion string // 1
}

// PoolStatusReply is rpc.PoolStatusReply.
type PoolStatusReply struct {
	TotalIPs     int32 // 1
	AssignedIPs  int32 // 2
	AvailableIPs int32 // 3
}

// Attachment is rpc.Attachment.
type Attachment struct {
	ContainerID string // 1
	IfName      string // 2
}

// GarbageCollectRequest is rpc.GarbageCollectRequest.
type GarbageCollectRequest struct {
	NetworkName      string        // 1
	ValidAttachments []*Attachment // 2
	ClientVersion    string        // 3
}

// GarbageCollectReply is rpc.GarbageCollectReply.
type GarbageCollectReply struct {
	Released int32 // 1
	Deferred int32 // 2
}

// HealthStatus is grpc.health.v1.HealthCheckResponse.ServingStatus.
type HealthStatus int32

// The serving states of the health protocol.
const (
	HealthUnknown        HealthStatus = 0
	HealthServing        HealthStatus = 1
	HealthNotServing     HealthStatus = 2
	HealthServiceUnknown HealthStatus = 3
)

func (s HealthStatus) String() string {
	switch s {
	case HealthUnknown:
		return "UNKNOWN"
	case HealthServing:
		return "SERVING"
	case HealthNotServing:
		return "NOT_SERVING"
	case HealthServiceUnknown:
		return "SERVICE_UNKNOWN"
	}
	return "HealthStatus(" + strconv.Itoa(int(s)) + ")"
}

// appendString appends a string field; proto3 leaves empty strings out.
func appendString(b []byte, n int, s string) []byte {
	if s == "" {
		return b
	}
	return appendBytes(appendTag(b, n, bytesType), []byte(s))
}

func appendBool(b []byte, n int, v bool) []byte {
	if !v {
		return b
	}
	return appendVarint(appendTag(b, n, varintType), 1)
}

func appendMessage(b []byte, n int, m []byte) []byte {
	return appendBytes(appendTag(b, n, bytesType), m)
}

func (r *AddNetworkRequest) marshal() []byte {
	var b []byte
	b = appendString(b, 1, r.K8S_POD_NAME)
	b = appendString(b, 2, r.K8S_POD_NAMESPACE)
	b = appendString(b, 3, r.K8S_POD_INFRA_CONTAINER_ID)
	b = appendString(b, 4, r.Netns)
	b = appendString(b, 5, r.IfName)
	b = appendString(b, 6, r.NetworkName)
	b = appendString(b, 7, r.ContainerID)
	b = appendString(b, 8, r.ClientVersion)
	return appendBool(b, 9, r.RequiresMultiNICAttachment)
}

func (r *DelNetworkRequest) marshal() []byte {
	var b []byte
	b = appendString(b, 1, r.K8S_POD_NAME)
	b = appendString(b, 2, r.K8S_POD_NAMESPACE)
	b = appendString(b, 3, r.K8S_POD_INFRA_CONTAINER_ID)
	b = appendString(b, 5, r.Reason)
	b = appendString(b, 6, r.IfName)
	b = appendString(b, 7, r.NetworkName)
	b = appendString(b, 8, r.ContainerID)
	b = appendString(b, 9, r.ClientVersion)
	return appendString(b, 10, r.K8S_POD_UID)
}

func (r *PoolStatusRequest) marshal() []byte { return appendString(nil, 1, r.ClientVersion) }

func (r *GarbageCollectRequest) marshal() []byte {
	b := appendString(nil, 1, r.NetworkName)
	for _, a := range r.ValidAttachments {
		var m []byte
		if a != nil {
			m = appendString(appendString(nil, 1, a.ContainerID), 2, a.IfName)
		}
		b = appendMessage(b, 2, m)
	}
	return appendString(b, 3, r.ClientVersion)
}

// healthCheckRequest is grpc.health.v1.HealthCheckRequest.
func healthCheckRequest(service string) []byte { return appendString(nil, 1, service) }

var errMalformed = errors.New("malformed protobuf message")

// field is one decoded field: v for varints, b for length-delimited ones.
type field struct {
	num int
	typ wireType
	v   uint64
	b   []byte
}

// eachField decodes b field by field, skipping fixed-width fields (no
// message here has any); groups, which proto3 does not have, are
// malformed.
func eachField(b []byte, f func(field) error) error {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		fl := field{num: num, typ: typ}
		switch typ {
		case varintType:
			fl.v, n = consumeVarint(b)
		case bytesType:
			fl.b, n = consumeBytes(b)
		case fixed64Type:
			n = 8
		case fixed32Type:
			n = 4
		default:
			n = -1
		}
		if n < 0 || n > len(b) {
			return errMalformed
		}
		b = b[n:]
		if err := f(fl); err != nil {
			return err
		}
	}
	return nil
}

// int32 fields are varints of the sign-extended value.
func (f field) int32() int32 { return int32(f.v) }

func unmarshalMetadata(b []byte) (*IPAllocationMetadata, error) {
	md := &IPAllocationMetadata{}
	return md, eachField(b, func(f field) error {
		switch {
		case f.num == 1 && f.typ == bytesType:
			md.IPv4Addr = string(f.b)
		case f.num == 2 && f.typ == bytesType:
			md.IPv6Addr = string(f.b)
		case f.num == 3 && f.typ == varintType:
			md.DeviceNumber = f.int32()
		case f.num == 4 && f.typ == varintType:
			md.RouteTableId = f.int32()
		}
		return nil
	})
}

// unmarshalNetworkReply decodes the fields AddNetworkReply and
// DelNetworkReply share (Success = 1, IPAllocationMetadata = 2) and the
// two whose numbers differ.
func unmarshalNetworkReply(b []byte, vlanNum, policyNum int,
	success *bool, mds *[]*IPAllocationMetadata, vlan *int32, policy *string) error {
	return eachField(b, func(f field) error {
		switch {
		case f.num == 1 && f.typ == varintType:
			*success = f.v != 0
		case f.num == 2 && f.typ == bytesType:
			md, err := unmarshalMetadata(f.b)
			if err != nil {
				return err
			}
			*mds = append(*mds, md)
		case f.num == vlanNum && f.typ == varintType:
			*vlan = f.int32()
		case f.num == policyNum && f.typ == bytesType:
			*policy = string(f.b)
		}
		return nil
	})
}

func (r *AddNetworkReply) unmarshal(b []byte) error {
	if err := unmarshalNetworkReply(b, 7, 13, &r.Success, &r.IPAllocationMetadata, &r.PodVlanId, &r.NetworkPolicyMode); err != nil {
		return err
	}
	// The branch ENI's fields (security groups for pods).
	return eachField(b, func(f field) error {
		switch {
		case f.num == 8 && f.typ == bytesType:
			r.PodENIMAC = string(f.b)
		case f.num == 9 && f.typ == bytesType:
			r.PodENISubnetGW = string(f.b)
		case f.num == 10 && f.typ == varintType:
			r.ParentIfIndex = f.int32()
		}
		return nil
	})
}

func (r *DelNetworkReply) unmarshal(b []byte) error {
	return unmarshalNetworkReply(b, 4, 6, &r.Success, &r.IPAllocationMetadata, &r.PodVlanId, &r.NetworkPolicyMode)
}

func (r *PoolStatusReply) unmarshal(b []byte) error {
	return eachField(b, func(f field) error {
		if f.typ != varintType {
			return nil
		}
		switch f.num {
		case 1:
			r.TotalIPs = f.int32()
		case 2:
			r.AssignedIPs = f.int32()
		case 3:
			r.AvailableIPs = f.int32()
		}
		return nil
	})
}

func (r *GarbageCollectReply) unmarshal(b []byte) error {
	return eachField(b, func(f field) error {
		if f.typ != varintType {
			return nil
		}
		switch f.num {
		case 1:
			r.Released = f.int32()
		case 2:
			r.Deferred = f.int32()
		}
		return nil
	})
}

// unmarshalHealth decodes grpc.health.v1.HealthCheckResponse (status = 1).
func unmarshalHealth(b []byte) (HealthStatus, error) {
	s := HealthUnknown
	err := eachField(b, func(f field) error {
		if f.num == 1 && f.typ == varintType {
			s = HealthStatus(f.int32())
		}
		return nil
	})
	return s, err
}
