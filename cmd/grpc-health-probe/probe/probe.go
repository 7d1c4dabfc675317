// Package probe is the gRPC health check behind grpc-health-probe, usable
// in-process (the aws-vpc-cni entrypoint polls ipamd with it). It only ever
// reads: one connection, one grpc.health.v1.Health/Check call. It never
// imports pkg/ipamd/... or the simulators.
package probe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Code is the outcome of a check, numbered as grpc-health-probe's exit codes.
type Code int

const (
	Serving          Code = 0 // the service reported SERVING
	BadArguments     Code = 1 // invalid flags or options
	ConnectionFailed Code = 2 // no connection within the connect timeout
	RPCFailed        Code = 3 // the Check call failed (Unimplemented, NotFound, deadline, ...)
	NotServing       Code = 4 // the service answered with a status other than SERVING
)

func (c Code) String() string {
	switch c {
	case Serving:
		return "serving"
	case BadArguments:
		return "bad arguments"
	case ConnectionFailed:
		return "connection failure"
	case RPCFailed:
		return "rpc failure"
	case NotServing:
		return "not serving"
	}
	return fmt.Sprintf("code %d", int(c))
}

// Defaults of grpc-health-probe.
const (
	DefaultUserAgent      = "grpc-health-probe"
	DefaultConnectTimeout = time.Second
	DefaultRPCTimeout     = time.Second
)

// Options describe one check.
type Options struct {
	// Addr is a gRPC target: host:port, unix:///abs/path or unix:rel/path.
	Addr string
	// Service is the name sent in the request; "" asks for the server's
	// overall health.
	Service        string
	UserAgent      string        // "" means DefaultUserAgent
	ConnectTimeout time.Duration // must be > 0
	RPCTimeout     time.Duration // must be > 0
}

// Result is a check's outcome; Err explains anything but Serving.
type Result struct {
	Code   Code
	Status healthpb.HealthCheckResponse_ServingStatus // set when the server answered
	Err    error
	// ConnectTime and RPCTime are how long each phase took (for -v).
	ConnectTime, RPCTime time.Duration
}

// Validate reports option errors (exit code 1).
func (o Options) Validate() error {
	if o.Addr == "" {
		return errors.New("-addr not specified")
	}
	if o.ConnectTimeout <= 0 {
		return fmt.Errorf("-connect-timeout must be greater than zero (got %v)", o.ConnectTimeout)
	}
	if o.RPCTimeout <= 0 {
		return fmt.Errorf("-rpc-timeout must be greater than zero (got %v)", o.RPCTimeout)
	}
	return nil
}

// Check connects to o.Addr without transport security and asks the health
// service about o.Service. ctx cancels the whole check.
func Check(ctx context.Context, o Options) Result {
	if err := o.Validate(); err != nil {
		return Result{Code: BadArguments, Err: err}
	}
	ua := o.UserAgent
	if ua == "" {
		ua = DefaultUserAgent
	}
	conn, err := grpc.NewClient(o.Addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(ua),
		grpc.WithNoProxy(),
	)
	if err != nil {
		return Result{Code: BadArguments, Err: fmt.Errorf("invalid -addr %q: %w", o.Addr, err)}
	}
	defer conn.Close()

	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	ready, err := awaitConnection(cctx, conn)
	cancel()
	res := Result{ConnectTime: time.Since(start)}
	if err != nil {
		res.Code, res.Err = ConnectionFailed, fmt.Errorf("failed to connect to %s within %v: %w", o.Addr, o.ConnectTimeout, err)
		return res
	}

	start = time.Now()
	rctx, cancel := context.WithTimeout(ctx, o.RPCTimeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(rctx, &healthpb.HealthCheckRequest{Service: o.Service})
	res.RPCTime = time.Since(start)
	if err != nil {
		st := status.Convert(err)
		switch {
		case !ready && (st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded || st.Code() == codes.Canceled):
			// The connection had already failed; the fail-fast call
			// carries its reason (or ran out of time reconnecting, or
			// the caller gave up).
			res.Code, res.Err = ConnectionFailed, fmt.Errorf("failed to connect to %s: %s", o.Addr, st.Message())
		case st.Code() == codes.Unimplemented:
			res.Code, res.Err = RPCFailed, fmt.Errorf("the server at %s does not implement the grpc health protocol (grpc.health.v1.Health): %s", o.Addr, st.Message())
		case st.Code() == codes.DeadlineExceeded:
			res.Code, res.Err = RPCFailed, fmt.Errorf("health rpc timed out after %v", o.RPCTimeout)
		default:
			res.Code, res.Err = RPCFailed, fmt.Errorf("health rpc failed: %s: %s", st.Code(), st.Message())
		}
		return res
	}
	res.Status = resp.GetStatus()
	if res.Status != healthpb.HealthCheckResponse_SERVING {
		res.Code, res.Err = NotServing, fmt.Errorf("service %q unhealthy (responded with %q)", o.Service, res.Status)
		return res
	}
	res.Code = Serving
	return res
}

// awaitConnection drives conn until it is READY (true) or has failed once
// (false, nil: the caller's fail-fast RPC then reports why). It returns an
// error only when ctx ends first. Failing on the first TRANSIENT_FAILURE
// instead of waiting out the backoff keeps a poll loop on a socket that does
// not exist yet cheap.
func awaitConnection(ctx context.Context, conn *grpc.ClientConn) (bool, error) {
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return true, nil
		case connectivity.TransientFailure:
			return false, nil
		case connectivity.Shutdown:
			return false, errors.New("connection shut down")
		case connectivity.Idle:
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, s) {
			return false, ctx.Err()
		}
	}
}
