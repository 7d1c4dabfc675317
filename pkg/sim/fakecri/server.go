package fakecri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxSocketPath is the longest path a unix socket address can hold on Linux
// (sun_path is 108 bytes including the terminating NUL).
const maxSocketPath = 107

// server adapts Runtime to the generated RuntimeService interface; methods
// it does not implement answer Unimplemented.
type server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	r *Runtime
}

// Serve listens on the unix socket socketPath, removing a stale file there
// first, and serves the CRI RuntimeService in the background until Stop.
func (r *Runtime) Serve(socketPath string) error {
	if len(socketPath) > maxSocketPath {
		return fmt.Errorf("fakecri: socket path %q is %d bytes, unix sockets allow %d", socketPath, len(socketPath), maxSocketPath)
	}
	r.srvMu.Lock()
	defer r.srvMu.Unlock()
	if r.srv != nil {
		return errors.New("fakecri: already serving on " + r.socket)
	}
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("fakecri: remove stale socket: %w", err)
	}
	lis, err := net.Listen("unix", socketPath)
	if err != nil {
		return fmt.Errorf("fakecri: listen: %w", err)
	}
	stopping := make(chan struct{})
	srv := grpc.NewServer(grpc.UnaryInterceptor(r.interceptor(stopping)), grpc.ForceServerCodecV2(serverCodec{}))
	srv.RegisterService(serviceDesc(), &server{r: r}) // ListPodSandbox: see list.go
	r.srv, r.socket, r.stopping = srv, socketPath, stopping
	go func() { _ = srv.Serve(lis) }()
	return nil
}

// Endpoint returns the CRI endpoint clients dial: "unix://" plus the socket
// path. It is "unix://" alone before Serve.
func (r *Runtime) Endpoint() string {
	r.srvMu.Lock()
	defer r.srvMu.Unlock()
	return "unix://" + r.socket
}

// Stop ends serving, aborting delayed calls, and removes the socket file.
// Stop is a no-op when not serving; Serve may be called again afterwards.
func (r *Runtime) Stop() {
	r.srvMu.Lock()
	defer r.srvMu.Unlock()
	if r.srv == nil {
		return
	}
	close(r.stopping)
	r.srv.Stop()
	_ = os.Remove(r.socket)
	r.srv, r.stopping = nil, nil
}

func (s *server) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       s.r.runtimeName(),
		RuntimeVersion:    "0.0.0",
		RuntimeApiVersion: "v1",
	}, nil
}

// ListPodSandbox builds the answer the generated way. The served
// ListPodSandbox is encodedList (list.go), which must answer the same.
func (s *server) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	resp := &runtimeapi.ListPodSandboxResponse{}
	if s.r.emptyList() {
		return resp, nil
	}
	filter := req.GetFilter()
	for _, sb := range s.r.visible() {
		if matches(sb, filter) {
			resp.Items = append(resp.Items, toPodSandbox(sb))
		}
	}
	return resp, nil
}

func (s *server) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	sb, ok := s.r.lookupVisible(req.GetPodSandboxId())
	if !ok {
		return nil, notFound(req.GetPodSandboxId())
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: toStatus(sb)}, nil
}

func (s *server) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	meta := req.GetConfig().GetMetadata()
	if meta == nil {
		return nil, status.Error(codes.InvalidArgument, "fakecri: sandbox config metadata is required")
	}
	// Like containerd, the sandbox exists but is not listed while its
	// network is being set up.
	sb := s.r.Add(Sandbox{
		Name:        meta.GetName(),
		Namespace:   meta.GetNamespace(),
		UID:         meta.GetUid(),
		Attempt:     meta.GetAttempt(),
		State:       runtimeapi.PodSandboxState_SANDBOX_READY,
		Labels:      req.GetConfig().GetLabels(),
		Annotations: req.GetConfig().GetAnnotations(),
		Hidden:      true,
	})
	var ip string
	if hook := s.r.hook(); hook != nil {
		var err error
		if ip, err = hook(meta); err != nil {
			s.r.Remove(sb.ID)
			return nil, status.Errorf(codes.Unknown, "fakecri: setup network for sandbox %q: %v", sb.ID, err)
		}
	}
	if !s.r.setIPAndShow(sb.ID, ip) {
		return nil, status.Errorf(codes.Aborted, "fakecri: sandbox %q removed during setup", sb.ID)
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: sb.ID}, nil
}

func (s *server) StopPodSandbox(_ context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	id := req.GetPodSandboxId()
	if _, ok := s.r.lookupVisible(id); !ok {
		return nil, notFound(id)
	}
	s.r.SetState(id, runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox is idempotent: removing an unknown sandbox succeeds.
func (s *server) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	s.r.Remove(req.GetPodSandboxId())
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func notFound(id string) error {
	return status.Errorf(codes.NotFound, "fakecri: sandbox %q not found", id)
}

// matches reports whether sb passes filter; a nil filter passes everything.
func matches(sb Sandbox, filter *runtimeapi.PodSandboxFilter) bool {
	if filter == nil {
		return true
	}
	if filter.GetId() != "" && filter.GetId() != sb.ID {
		return false
	}
	if st := filter.GetState(); st != nil && st.GetState() != sb.State {
		return false
	}
	for k, v := range filter.GetLabelSelector() {
		if got, ok := sb.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func toMetadata(sb Sandbox) *runtimeapi.PodSandboxMetadata {
	return &runtimeapi.PodSandboxMetadata{
		Name:      sb.Name,
		Namespace: sb.Namespace,
		Uid:       sb.UID,
		Attempt:   sb.Attempt,
	}
}

func toPodSandbox(sb Sandbox) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{
		Id:          sb.ID,
		Metadata:    toMetadata(sb),
		State:       sb.State,
		CreatedAt:   sb.CreatedAt.UnixNano(),
		Labels:      sb.Labels,
		Annotations: sb.Annotations,
	}
}

func toStatus(sb Sandbox) *runtimeapi.PodSandboxStatus {
	network := &runtimeapi.PodSandboxNetworkStatus{Ip: sb.IP}
	for _, ip := range sb.AdditionalIPs {
		network.AdditionalIps = append(network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
	}
	return &runtimeapi.PodSandboxStatus{
		Id:          sb.ID,
		Metadata:    toMetadata(sb),
		State:       sb.State,
		CreatedAt:   sb.CreatedAt.UnixNano(),
		Network:     network,
		Labels:      sb.Labels,
		Annotations: sb.Annotations,
	}
}
