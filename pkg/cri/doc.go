// Package cri is ipamd's read-only client of the container runtime's CRI
// RuntimeService (k8s.io/cri-api v1) over its unix socket: it lists pod
// sandboxes in every state and reads one sandbox's status (its pod IP).
//
// It owns finding the runtime and staying connected to it:
//
//   - endpoint.go turns CRI_RUNTIME_ENDPOINT into a socket path and refuses
//     forms that would fail every call;
//   - client.go is one connection, which reconnects within seconds after
//     the runtime deletes and recreates its socket on restart;
//   - sandboxlist.go decodes the ListPodSandbox answer itself, keeping only
//     what ipamd reads (no labels, and of the annotations only whether the
//     pod asked for multi-NIC), since the reconciler
//     lists every sandbox on every pass;
//   - runtime.go and probe.go choose the socket lazily when none is
//     configured (a runtime that starts after ipamd is picked up; the one
//     that lists ipamd's own pod wins, else one that lists sandboxes wins
//     over one that answers an empty list), and record whether the runtime
//     was reachable.
//
// It never creates, stops or removes anything, and every call carries a
// timeout so a hung runtime cannot stall ipamd. It starts no goroutine of
// its own beyond gRPC's connection handling, which Close ends. It never
// imports pkg/ipamd/...: the pod-IP reconciler uses it through its own
// SandboxSource interface.
package cri
