package awsutils

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"
)

// Error classes ipamd branches on.
var (
	// ErrSubnetExhausted: the subnet has no free addresses or /28 blocks;
	// pool growth pauses for a cool-down.
	ErrSubnetExhausted = errors.New("subnet has no free addresses")
	// ErrAddressLimit: the ENI holds as many addresses as it may.
	ErrAddressLimit = errors.New("ENI address limit reached")
	// ErrENILimit: the instance has as many ENIs attached as it may.
	ErrENILimit = errors.New("instance ENI limit reached")
	// ErrUnauthorized: the node's IAM role lacks a permission.
	ErrUnauthorized = errors.New("not authorized")
	// ErrNotFound: the ENI, attachment or address does not exist.
	ErrNotFound = errors.New("not found")
	// ErrThrottled: EC2 kept throttling after the SDK's retries.
	ErrThrottled = errors.New("throttled")
	// ErrENIInUse: the ENI is attached (or still attaching or detaching),
	// so it cannot be attached again or deleted yet.
	ErrENIInUse = errors.New("ENI in use")
	// ErrPlacement: the subnet or a security group named for a new ENI
	// (custom networking's ENIConfig) does not exist, or the subnet is not
	// in the instance's VPC and availability zone.
	ErrPlacement = errors.New("subnet or security group unusable for this instance's ENIs")
)

var codeClass = map[string]error{
	"InsufficientFreeAddressesInSubnet":  ErrSubnetExhausted,
	"InsufficientCidrBlocks":             ErrSubnetExhausted,
	"PrivateIpAddressLimitExceeded":      ErrAddressLimit,
	"AddressLimitExceeded":               ErrAddressLimit,
	"AttachmentLimitExceeded":            ErrENILimit,
	"UnauthorizedOperation":              ErrUnauthorized,
	"InvalidNetworkInterfaceID.NotFound": ErrNotFound,
	"InvalidAttachmentID.NotFound":       ErrNotFound,
	"RequestLimitExceeded":               ErrThrottled,
	"Throttling":                         ErrThrottled,
	"InvalidNetworkInterface.InUse":      ErrENIInUse,
	"InvalidSubnetID.NotFound":           ErrPlacement,
	"InvalidGroup.NotFound":              ErrPlacement,
	"InvalidSecurityGroupID.NotFound":    ErrPlacement,
}

// inUseText is how EC2 says, under the generic InvalidParameterValue code,
// that DeleteNetworkInterface met an attached ENI: the text is the only
// signal on the wire.
const inUseText = "is currently in use"

// APIError is an EC2 error with its action and code, classified.
type APIError struct {
	Action string
	Code   string
	Err    error // the SDK error
	class  error
}

func (e *APIError) Error() string {
	return fmt.Sprintf("ec2 %s: %v", e.Action, e.Err)
}

// Unwrap exposes both the class sentinel and the SDK error.
func (e *APIError) Unwrap() []error {
	if e.class != nil {
		return []error{e.class, e.Err}
	}
	return []error{e.Err}
}

// classify wraps an SDK error from action; nil stays nil.
func classify(action string, err error) error {
	if err == nil {
		return nil
	}
	code := errorCode(err)
	class := codeClass[code]
	var ae smithy.APIError
	if code == "InvalidParameterValue" && errors.As(err, &ae) && strings.Contains(ae.ErrorMessage(), inUseText) {
		class = ErrENIInUse
	}
	return &APIError{Action: action, Code: code, Err: err, class: class}
}

// errorCode returns the EC2 error code of err, or "" for transport errors.
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
