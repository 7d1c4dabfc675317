package podip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

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
		out[i] = Sandbox{ID: sb.ID, Name: sb.Name, Namespace: sb.Namespace, Ready: sb.Ready}
	}
	return out, nil
}

// SandboxStatus describes one sandbox with the IPs the runtime reports.
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
	out := SandboxStatus{Sandbox: Sandbox{ID: st.ID, Name: st.Name, Namespace: st.Namespace, Ready: st.Ready}}
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

// Runtime is the adapted CRI runtime (for the agent's probe-mode checks).
func (s *CRISandboxes) Runtime() CRIRuntime { return s.rt }

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
