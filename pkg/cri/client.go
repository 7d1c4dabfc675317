package cri

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DefaultTimeout bounds each CRI call.
const DefaultTimeout = 5 * time.Second

// Sandbox is one pod sandbox as ListPodSandbox reports it.
type Sandbox struct {
	ID, Name, Namespace, UID string
	Ready                    bool
	CreatedAt                time.Time
}

// SandboxStatus is what PodSandboxStatus adds: the pod's IPs.
type SandboxStatus struct {
	Sandbox
	IP            string
	AdditionalIPs []string
}

// Client talks to one runtime.
type Client struct {
	conn    *grpc.ClientConn
	rt      runtimeapi.RuntimeServiceClient
	path    string
	timeout time.Duration
	log     *slog.Logger
	version sync.Once
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

// handshake logs the runtime's name and version the first time it answers.
func (c *Client) handshake(ctx context.Context) {
	c.version.Do(func() {
		v, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
		if err != nil {
			c.log.Warn("CRI version handshake failed", "endpoint", c.path, "error", err)
			return
		}
		c.log.Info("connected to container runtime", "endpoint", c.path, "runtime", v.RuntimeName,
			"version", v.RuntimeVersion, "criVersion", v.RuntimeApiVersion)
	})
}

// ListSandboxes lists every pod sandbox, READY and NOTREADY.
func (c *Client) ListSandboxes(ctx context.Context) ([]Sandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("cri: ListPodSandbox: %w", err)
	}
	c.handshake(ctx)
	out := make([]Sandbox, 0, len(resp.Items))
	for _, s := range resp.Items {
		out = append(out, fromSandbox(s.Id, s.Metadata, s.State, s.CreatedAt))
	}
	return out, nil
}

// SandboxStatus returns one sandbox with its IPs.
func (c *Client) SandboxStatus(ctx context.Context, id string) (SandboxStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		return SandboxStatus{}, fmt.Errorf("cri: PodSandboxStatus %s: %w", id, err)
	}
	st := resp.GetStatus()
	if st == nil {
		return SandboxStatus{}, fmt.Errorf("cri: PodSandboxStatus %s: empty status", id)
	}
	out := SandboxStatus{Sandbox: fromSandbox(st.Id, st.Metadata, st.State, st.CreatedAt)}
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
