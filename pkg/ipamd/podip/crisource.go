package podip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
)

// CRIRuntime is the container runtime's CRI as pkg/cri serves it
// (*cri.Client on one socket, *cri.Runtime choosing the socket).
type CRIRuntime interface {
	ListSandboxes(ctx context.Context) ([]cri.Sandbox, error)
	SandboxStatus(ctx context.Context, id string) (cri.SandboxStatus, error)
}

// CRISource is the SandboxSource on the runtime's CRI: the one place
// where CRI sandboxes become podip's and gRPC codes become its sentinels.
// containerd and CRI-O answer NotFound for an ID they do not hold (and for
// a sandbox whose CNI ADD is still running, which the grace period
// covers); the kubelet relies on the same code.
func CRISource(rt CRIRuntime) *CRISandboxes { return &CRISandboxes{rt: rt} }

// CRISandboxes adapts a CRIRuntime; see CRISource.
type CRISandboxes struct{ rt CRIRuntime }

// ListSandboxes lists every sandbox, READY and NOTREADY.
func (s *CRISandboxes) ListSandboxes(ctx context.Context) ([]Sandbox, error) {
	list, err := s.rt.ListSandboxes(ctx)
	if err != nil {
		return nil, classify(err, false)
	}
	out := make([]Sandbox, len(list))
	for i, sb := range list {
		out[i] = Sandbox{ID: sb.ID, Name: sb.Name, Namespace: sb.Namespace, Ready: sb.Ready, MultiNIC: sb.MultiNIC}
	}
	return out, nil
}

// SandboxStatus describes one sandbox with the IPs it may be using: those
// the runtime reports, except for a sandbox that is not ready on a runtime
// that keeps reporting them after StopPodSandbox released them
// (cri.KeepsIPsAfterTeardown: CRI-O), which then has none. On containerd
// and runtimes not known there a NOTREADY sandbox's IPs count as
// reported: containerd stops reporting them once its network is torn down.
func (s *CRISandboxes) SandboxStatus(ctx context.Context, id string) (SandboxStatus, error) {
	if id == "" {
		// CRI-O answers NotFound for an empty ID: that is no word about
		// any sandbox.
		return SandboxStatus{}, errors.New("cri: no sandbox ID to ask about")
	}
	st, err := s.rt.SandboxStatus(ctx, id)
	if err != nil {
		return SandboxStatus{}, classify(err, true)
	}
	out := SandboxStatus{Sandbox: Sandbox{ID: st.ID, Name: st.Name, Namespace: st.Namespace, Ready: st.Ready, MultiNIC: st.MultiNIC}}
	if !st.Ready && cri.KeepsIPsAfterTeardown(st.Runtime) {
		return out, nil
	}
	for _, v := range append([]string{st.IP}, st.AdditionalIPs...) {
		if ip, err := netip.ParseAddr(v); err == nil {
			out.IPs = append(out.IPs, ip)
		}
	}
	return out, nil
}

// Close closes the runtime client when it has a Close.
func (s *CRISandboxes) Close() error {
	if c, ok := s.rt.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// classify wraps err in podip's sentinels: NotFound (for a status call
// only) and a deadline, whether the caller's or gRPC's.
func classify(err error, status bool) error {
	code := grpcCode(err)
	switch {
	case status && code == codes.NotFound:
		return fmt.Errorf("%w: %w", ErrSandboxNotFound, err)
	case errors.Is(err, context.DeadlineExceeded) || code == codes.DeadlineExceeded:
		return fmt.Errorf("%w: %w", ErrRuntimeTimeout, err)
	}
	return err
}

// grpcCode is the gRPC status code inside err, however deeply pkg/cri
// wrapped it (codes.Unknown when there is none).
func grpcCode(err error) codes.Code {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Code()
	}
	return codes.Unknown
}

// OpenCRI connects to the runtime named by rc.CRIEndpoint or, when it is
// empty, to the first of sockets (nil: cri.DefaultSocketCandidates) that
// answers. verifying says whether addresses that join the pool wait for the
// check against it from the start: true when a runtime socket exists
// (configured or probed), false when probing found none yet (then they
// join free, as upstream, until a runtime appears and answers).
func OpenCRI(rc Config, sockets []string, log *slog.Logger) (src *CRISandboxes, verifying bool, err error) {
	if sockets == nil {
		sockets = cri.DefaultSocketCandidates
	}
	rt, err := cri.NewRuntime(cri.Config{Endpoint: rc.CRIEndpoint, Candidates: sockets, OwnPod: rc.PodName, Timeout: rc.CRITimeout, Log: log})
	if err != nil {
		return nil, false, err
	}
	src = CRISource(rt)
	if rc.CRIEndpoint != "" {
		if path, _ := cri.NormalizeEndpoint(rc.CRIEndpoint); !isSocket(path) {
			log.Error("CRI_RUNTIME_ENDPOINT names no socket (yet): addresses that join the pool wait until the runtime answers; "+
				"mount the runtime's socket directory and name its socket, or turn the reconciler off (criSocket.enabled=false)",
				"CRI_RUNTIME_ENDPOINT", rc.CRIEndpoint)
		}
		return src, true, nil
	}
	if _, err := cri.ResolveEndpoint("", sockets); err != nil {
		log.Warn("no container runtime socket found yet: the pod-IP reconciler waits for one to appear, and addresses join the pool unchecked until it answers "+
			"(mount the runtime socket directory and set CRI_RUNTIME_ENDPOINT)", "error", err)
		return src, false, nil
	}
	return src, true, nil
}

func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}
