package ipamdwire

import (
	"errors"
	"net"
	"time"
)

// Full method names (rpc_grpc.pb.go and grpc.health.v1).
const (
	methodAddNetwork     = "/rpc.CNIBackend/AddNetwork"
	methodDelNetwork     = "/rpc.CNIBackend/DelNetwork"
	methodPoolStatus     = "/rpc.CNIMaintenance/PoolStatus"
	methodGarbageCollect = "/rpc.CNIMaintenance/GarbageCollect"
	methodHealthCheck    = "/grpc.health.v1.Health/Check"
)

// maxReply bounds a reply message, as grpc-go's default receive limit.
const maxReply = 4 << 20

// Client calls ipamd at Socket (a unix socket path); every call opens its
// own connection and closes it, as the plugin makes one or two calls.
type Client struct {
	Socket string
}

// AddFailureTrailer is the trailer in which ipamd says why an ADD got no
// address (pkg/ipamd/rpcserver.AddFailureTrailer).
const AddFailureTrailer = "aws-vpc-cni-add-failure"

// AddNetwork calls CNIBackend.AddNetwork.
func (c Client) AddNetwork(req *AddNetworkRequest, timeout time.Duration) (*AddNetworkReply, error) {
	out := &AddNetworkReply{}
	return out, c.call(methodAddNetwork, req.marshal(), timeout, out.unmarshal, func(f map[string]string) {
		out.FailureCause = f[AddFailureTrailer]
	})
}

// DelNetwork calls CNIBackend.DelNetwork.
func (c Client) DelNetwork(req *DelNetworkRequest, timeout time.Duration) (*DelNetworkReply, error) {
	out := &DelNetworkReply{}
	return out, c.call(methodDelNetwork, req.marshal(), timeout, out.unmarshal)
}

// PoolStatus calls CNIMaintenance.PoolStatus.
func (c Client) PoolStatus(req *PoolStatusRequest, timeout time.Duration) (*PoolStatusReply, error) {
	out := &PoolStatusReply{}
	return out, c.call(methodPoolStatus, req.marshal(), timeout, out.unmarshal)
}

// GarbageCollect calls CNIMaintenance.GarbageCollect.
func (c Client) GarbageCollect(req *GarbageCollectRequest, timeout time.Duration) (*GarbageCollectReply, error) {
	out := &GarbageCollectReply{}
	return out, c.call(methodGarbageCollect, req.marshal(), timeout, out.unmarshal)
}

// Health calls the standard health service's Check for service ("" is
// the whole server).
func (c Client) Health(service string, timeout time.Duration) (HealthStatus, error) {
	s := HealthUnknown
	err := c.call(methodHealthCheck, healthCheckRequest(service), timeout, func(b []byte) (err error) {
		s, err = unmarshalHealth(b)
		return err
	})
	return s, err
}

// call makes one unary call on a new connection; trailers, if given, is
// shown the reply's headers and trailers.
func (c Client) call(method string, req []byte, timeout time.Duration, decode func([]byte) error, trailers ...func(map[string]string)) error {
	deadline := time.Now().Add(timeout)
	d := net.Dialer{Deadline: deadline}
	nc, err := d.Dial("unix", c.Socket)
	if err != nil {
		return &Error{Code: Unavailable, Message: "connection error: " + err.Error()}
	}
	defer nc.Close()
	if err := nc.SetDeadline(deadline); err != nil {
		return &Error{Code: Unavailable, Message: err.Error()}
	}
	s := newStream(nc)
	reply, err := s.unary(method, req, timeout)
	if err != nil {
		var e *Error
		var ne net.Error
		switch {
		case !time.Now().Before(deadline):
			// Out of time, whatever the connection said last (the server
			// resets the stream when the deadline it was sent passes).
			return &Error{Code: DeadlineExceeded, Message: "context deadline exceeded"}
		case errors.As(err, &e):
			return e
		case errors.As(err, &ne) && ne.Timeout():
			return &Error{Code: DeadlineExceeded, Message: "context deadline exceeded"}
		default:
			return &Error{Code: Unavailable, Message: "connection closed: " + err.Error()}
		}
	}
	if err := decode(reply); err != nil {
		return &Error{Code: Internal, Message: "decode " + method + " reply: " + err.Error()}
	}
	for _, t := range trailers {
		t(s.fields)
	}
	return nil
}
