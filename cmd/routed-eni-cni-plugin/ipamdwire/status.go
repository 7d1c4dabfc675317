package ipamdwire

import (
	"errors"
	"strconv"
)

// Code is a gRPC status code.
type Code uint32

// The codes the plugin tells apart, with gRPC's numbers.
const (
	OK                Code = 0
	Canceled          Code = 1
	Unknown           Code = 2
	DeadlineExceeded  Code = 4
	PermissionDenied  Code = 7
	ResourceExhausted Code = 8
	Unimplemented     Code = 12
	Internal          Code = 13
	Unavailable       Code = 14
	Unauthenticated   Code = 16
)

var codeNames = [...]string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
	"Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated"}

// String is the code's name as grpc-go prints it.
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Code(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// Error is a call's failure: the server's status, or the client's own
// (Unavailable when ipamd cannot be reached, DeadlineExceeded, Internal
// for a malformed answer).
type Error struct {
	Code    Code
	Message string
}

// Error reads as grpc-go's status errors do, so logs keep their shape.
func (e *Error) Error() string {
	return "rpc error: code = " + e.Code.String() + " desc = " + e.Message
}

// CodeOf is err's code: OK for nil, Unknown for an error not from a call.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Unknown
}

// httpStatusCode maps a non-200 HTTP status to a gRPC code as the gRPC
// HTTP/2 protocol says a client must.
func httpStatusCode(status string) Code {
	switch status {
	case "400":
		return Internal
	case "401":
		return Unauthenticated
	case "403":
		return PermissionDenied
	case "404":
		return Unimplemented
	case "429", "502", "503", "504":
		return Unavailable
	}
	return Unknown
}
