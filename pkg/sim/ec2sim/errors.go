package ec2sim

import (
	"errors"
	"fmt"
	"net/http"
)

// Error codes returned by the simulator. They are the codes EC2 uses.
const (
	CodeInvalidAction                 = "InvalidAction"
	CodeMissingParameter              = "MissingParameter"
	CodeUnknownParameter              = "UnknownParameter"
	CodeInvalidParameterValue         = "InvalidParameterValue"
	CodeInvalidParameterCombination   = "InvalidParameterCombination"
	CodeRequestLimitExceeded          = "RequestLimitExceeded"
	CodeInternalError                 = "InternalError"
	CodeUnauthorizedOperation         = "UnauthorizedOperation"
	CodeDryRunOperation               = "DryRunOperation"
	CodeOperationNotPermitted         = "OperationNotPermitted"
	CodeENINotFound                   = "InvalidNetworkInterfaceID.NotFound"
	CodeENIMalformed                  = "InvalidNetworkInterfaceID.Malformed"
	CodeENIInUse                      = "InvalidNetworkInterface.InUse"
	CodeAttachmentNotFound            = "InvalidAttachmentID.NotFound"
	CodeSubnetNotFound                = "InvalidSubnetID.NotFound"
	CodeSubnetMalformed               = "InvalidSubnetID.Malformed"
	CodeInstanceNotFound              = "InvalidInstanceID.NotFound"
	CodeInstanceMalformed             = "InvalidInstanceID.Malformed"
	CodeInvalidInstanceType           = "InvalidInstanceType"
	CodeSecurityGroupNotFound         = "InvalidGroup.NotFound"
	CodeSecurityGroupMalformed        = "InvalidGroupId.Malformed"
	CodeGroupsPerENILimitExceeded     = "SecurityGroupsPerInterfaceLimitExceeded"
	CodeVpcNotFound                   = "InvalidVpcID.NotFound"
	CodeVpcMalformed                  = "InvalidVpcID.Malformed"
	CodeInvalidVpcRange               = "InvalidVpc.Range"
	CodeInvalidSubnetRange            = "InvalidSubnet.Range"
	CodeInvalidID                     = "InvalidID"
	CodeAttachmentLimitExceeded       = "AttachmentLimitExceeded"
	CodePrivateIPAddressLimitExceeded = "PrivateIpAddressLimitExceeded"
	CodeIPAddressLimitExceeded        = "InvalidInterface.IpAddressLimitExceeded"
	CodeInsufficientFreeAddresses     = "InsufficientFreeAddressesInSubnet"
	CodeInsufficientCidrBlocks        = "InsufficientCidrBlocks"
	CodeTagLimitExceeded              = "TagLimitExceeded"
	CodeUnsupportedHTTPVerb           = "UnsupportedHttpVerb"
	CodeAuthFailure                   = "AuthFailure"
	CodeAssociationNotFound           = "InvalidAssociationID.NotFound"
	CodeAssociationMalformed          = "InvalidAssociationID.Malformed"
	CodeIncorrectState                = "IncorrectState"
	CodeIdempotentParameterMismatch   = "IdempotentParameterMismatch"
)

// APIError is an EC2 error as the simulator sends it on the wire. The
// direct-manipulation methods (AddSecondaryIPs, ...) return it too, so
// tests can branch on Code with errors.As.
type APIError struct {
	Code    string
	Message string
	Status  int // HTTP status code
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// newError builds a client error (HTTP 400) unless the code has its own
// status.
func newError(code, format string, args ...any) *APIError {
	return &APIError{Code: code, Message: fmt.Sprintf(format, args...), Status: statusFor(code)}
}

func statusFor(code string) int {
	switch code {
	case CodeRequestLimitExceeded:
		return http.StatusServiceUnavailable
	case CodeInternalError:
		return http.StatusInternalServerError
	case CodeUnauthorizedOperation:
		return http.StatusForbidden
	case CodeDryRunOperation:
		return http.StatusPreconditionFailed
	case CodeUnsupportedHTTPVerb:
		return http.StatusMethodNotAllowed
	case CodeAuthFailure:
		return http.StatusUnauthorized
	default:
		return http.StatusBadRequest
	}
}

// asAPIError turns any error from an action into the wire error; anything
// that is not already an APIError is a simulator bug and becomes an
// InternalError so that it shows up in tests.
func asAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	return newError(CodeInternalError, "ec2sim internal failure: %v", err)
}

// errThrottled is EC2's answer to a request over its limits, whether a
// bucket ran dry or the SetThrottle fault picked it.
func errThrottled() *APIError {
	return newError(CodeRequestLimitExceeded, "Request limit exceeded.")
}

func errMissing(name string) *APIError {
	return newError(CodeMissingParameter, "The request must contain the parameter %s", name)
}

func errBadValue(name, value, why string) *APIError {
	return newError(CodeInvalidParameterValue, "Value (%s) for parameter %s is invalid. %s", value, name, why)
}

func errCombination(format string, args ...any) *APIError {
	return newError(CodeInvalidParameterCombination, format, args...)
}

func errENINotFound(id string) *APIError {
	return newError(CodeENINotFound, "The networkInterface ID '%s' does not exist", id)
}

func errSubnetNotFound(id string) *APIError {
	return newError(CodeSubnetNotFound, "The subnet ID '%s' does not exist", id)
}
