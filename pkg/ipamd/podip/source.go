package podip

import (
	"context"
	"errors"
	"net/netip"
)

// The runtime as the reconciler sees it, in podip's own terms: every rule
// reads these types and sentinels, never a runtime's wire types or status
// codes, so another source of truth can be added beside the CRI one
// (crisource.go) without touching a rule.

// Sandbox is one pod sandbox as the runtime lists it.
type Sandbox struct {
	ID, Name, Namespace string
	// Ready is the READY state; a NOTREADY (stopping) sandbox still owns
	// its address.
	Ready bool
	// MultiNIC: the pod has an interface on every managed network card,
	// and the runtime reports only its first interface's (card 0's)
	// addresses: its IPs say nothing of its use of another card's.
	MultiNIC bool
}

// SandboxStatus is one sandbox as the runtime describes it when asked by
// its ID: what the list says, plus the pod's addresses.
type SandboxStatus struct {
	Sandbox
	IPs []netip.Addr
}

// SandboxSource lists the node's pod sandboxes in every state and
// describes one by its ID. SandboxStatus answers an error wrapping
// ErrSandboxNotFound only when the runtime itself says it has no sandbox
// with that ID; an error wrapping ErrRuntimeTimeout when the runtime did
// not answer in time; any other error says nothing about the sandbox.
type SandboxSource interface {
	ListSandboxes(ctx context.Context) ([]Sandbox, error)
	SandboxStatus(ctx context.Context, id string) (SandboxStatus, error)
}

var (
	// ErrSandboxNotFound: the runtime has no sandbox with that ID. For an
	// allocation past its grace period (so its CNI ADD returned long ago),
	// this is the runtime's own word that the pod is gone: sandbox IDs are
	// never reused.
	ErrSandboxNotFound = errors.New("the runtime has no such sandbox")
	// ErrRuntimeTimeout: the runtime did not answer in time.
	ErrRuntimeTimeout = errors.New("the runtime did not answer in time")
)
