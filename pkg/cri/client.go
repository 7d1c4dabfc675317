package cri

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DefaultTimeout bounds each CRI call.
const DefaultTimeout = 5 * time.Second

// reconnect is how gRPC retries a runtime socket that went away. containerd
// and CRI-O delete and recreate their socket on restart; gRPC's default
// backoff grows to 2 minutes, during which every call fails fast even though
// the runtime is back. A unix socket connects at once or not at all, so
// retrying often costs nothing and bounds the outage after a restart to
// about MaxDelay.
var reconnect = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  200 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   2 * time.Second,
	},
	MinConnectTimeout: 2 * time.Second,
}

// Sandbox is one pod sandbox as ListPodSandbox reports it.
type Sandbox struct {
	ID, Name, Namespace, UID string
	Ready                    bool
	CreatedAt                time.Time
	// MultiNIC: the pod asked for an interface on every network card (its
	// annotation MultiNICAnnotation is MultiNICAttachment, which the
	// kubelet passes to the runtime in the sandbox's annotations). The
	// runtime reports only its first interface's addresses.
	MultiNIC bool
}

// The pod annotation that asks for one interface per network card, and
// its value (the plugin reads the same pair from the runtime config).
const (
	MultiNICAnnotation = "k8s.amazonaws.com/nicConfig"
	MultiNICAttachment = "multi-nic-attachment"
)

// isMultiNIC says whether a sandbox's annotations ask for multi-NIC.
func isMultiNIC(annotations map[string]string) bool {
	return annotations[MultiNICAnnotation] == MultiNICAttachment
}

// SandboxStatus is what PodSandboxStatus adds: the pod's IPs, as the
// runtime reports them whatever the sandbox's state (see
// KeepsIPsAfterTeardown for what they prove once it is not ready).
type SandboxStatus struct {
	Sandbox
	IP            string
	AdditionalIPs []string
	// Runtime is the RuntimeName of the runtime that answered (see
	// Client.RuntimeName), "" when it has not told its name yet.
	Runtime string
}

// Client talks to the runtime on one socket path.
type Client struct {
	conn    *grpc.ClientConn
	rt      runtimeapi.RuntimeServiceClient
	path    string
	timeout time.Duration
	log     *slog.Logger
	// greeted is set once the runtime's version is asked for, and cleared
	// when the runtime becomes unavailable so a reconnect asks again.
	greeted atomic.Bool
	// name is the RuntimeName of the last Version answer (nil: none yet).
	name atomic.Pointer[string]
	// lastListed is how many sandboxes the last list held.
	lastListed atomic.Int64
}

// Dial connects to the runtime socket at path. The connection is lazy: a
// runtime that is down shows up as errors on calls, not here.
func Dial(path string, timeout time.Duration, log *slog.Logger) (*Client, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(reconnect),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return nil, fmt.Errorf("cri: dial %s: %w", path, err)
	}
	return &Client{conn: conn, rt: runtimeapi.NewRuntimeServiceClient(conn), path: path, timeout: timeout, log: log}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Endpoint is the socket path.
func (c *Client) Endpoint() string { return c.path }

// RuntimeName is the runtime's name as its CRI Version answer gives it
// ("containerd", "cri-o"), "" until it has answered one. The client asks
// the first time the runtime answers a call after connecting, and again
// after the runtime was unavailable (it keeps the name it had meanwhile).
func (c *Client) RuntimeName() string {
	if n := c.name.Load(); n != nil {
		return *n
	}
	return ""
}

// handshake asks the runtime's name and version, and logs them, the first
// time it answers after connecting.
func (c *Client) handshake(ctx context.Context) {
	if !c.greeted.CompareAndSwap(false, true) {
		return
	}
	v, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil {
		// Asked again at the next answer: the runtime's name decides what
		// a stopped sandbox's IPs prove (KeepsIPsAfterTeardown).
		c.greeted.Store(false)
		c.log.Warn("CRI version handshake failed", "endpoint", c.path, "error", err)
		return
	}
	name := v.RuntimeName
	c.name.Store(&name)
	c.log.Info("connected to container runtime", "endpoint", c.path, "runtime", v.RuntimeName,
		"version", v.RuntimeVersion, "criVersion", v.RuntimeApiVersion)
}

// failed wraps a call's error and notes a lost runtime.
func (c *Client) failed(op string, err error) error {
	if status.Code(err) == codes.Unavailable {
		c.greeted.Store(false)
	}
	return fmt.Errorf("cri: %s on %s: %w", op, c.path, err)
}

// ListSandboxes lists every pod sandbox, READY and NOTREADY.
func (c *Client) ListSandboxes(ctx context.Context) ([]Sandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// No filter: sandboxes in every state own their addresses. The answer
	// is decoded by sandboxListCodec (sandboxlist.go).
	list := sandboxList{hint: int(c.lastListed.Load()) + 8}
	err := c.conn.Invoke(ctx, runtimeapi.RuntimeService_ListPodSandbox_FullMethodName,
		&runtimeapi.ListPodSandboxRequest{}, &list, grpc.ForceCodecV2(sandboxListCodec{}))
	if err != nil {
		return nil, c.failed("ListPodSandbox", err)
	}
	c.handshake(ctx)
	c.lastListed.Store(int64(len(list.items)))
	return list.items, nil
}

// SandboxStatus returns one sandbox with its IPs.
func (c *Client) SandboxStatus(ctx context.Context, id string) (SandboxStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		return SandboxStatus{}, c.failed("PodSandboxStatus "+id, err)
	}
	st := resp.GetStatus()
	if st == nil {
		return SandboxStatus{}, fmt.Errorf("cri: PodSandboxStatus %s on %s: empty status", id, c.path)
	}
	c.handshake(ctx)
	out := SandboxStatus{Sandbox: fromSandbox(st.Id, st.Metadata, st.State, st.CreatedAt), Runtime: c.RuntimeName()}
	out.MultiNIC = isMultiNIC(st.Annotations)
	if n := st.Network; n != nil {
		out.IP = n.Ip
		for _, a := range n.AdditionalIps {
			out.AdditionalIPs = append(out.AdditionalIPs, a.GetIp())
		}
	}
	return out, nil
}

func fromSandbox(id string, md *runtimeapi.PodSandboxMetadata, state runtimeapi.PodSandboxState, created int64) Sandbox {
	s := Sandbox{ID: id, Ready: state == runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: time.Unix(0, created)}
	if md != nil {
		s.Name, s.Namespace, s.UID = md.Name, md.Namespace, md.Uid
	}
	return s
}
