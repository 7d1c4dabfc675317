// Package fakecri is a fake container runtime that serves the real CRI v1
// RuntimeService gRPC API (k8s.io/cri-api/pkg/apis/runtime/v1) on a unix
// socket, with in-memory state and switchable faults, for testing ipamd's
// pod-IP reconciler without a real runtime.
//
// It behaves like containerd where it matters to the reconciler:
//
//   - a sandbox whose CNI ADD is in flight is not listed yet, and
//     PodSandboxStatus answers NotFound for it (see Sandbox.Hidden, Show,
//     and RunPodSandbox, which keeps the sandbox hidden while the IP hook
//     runs);
//   - sandboxes are listed in both the READY and NOTREADY states;
//   - PodSandboxStatus reports the pod IP in Status.Network;
//   - listed sandboxes carry their labels and annotations, as containerd
//     returns them.
//
// ListPodSandbox answers from encodings cached per sandbox (list.go): the
// bytes are those the generated code produces, but a benchmark of a client
// is not charged for the fake re-encoding every label map on every call.
//
// Tests drive the state directly through the Go API (Add, Show, SetState,
// Remove, Sandboxes) or through an ordinary CRI client (RunPodSandbox,
// StopPodSandbox, RemovePodSandbox), and inject faults with FailNext,
// SetError, SetDelay, SetEmpty, FailStatusOf and OmitFromList (a partial
// list whose sandboxes still answer PodSandboxStatus). Calls reports how
// often each RPC method was invoked. Version answers RuntimeName "fakecri"
// unless SetRuntimeName presents the fake as another runtime ("cri-o");
// the name changes nothing else, and a stopped sandbox keeps reporting
// its IP whatever the name (set IP to "" to model containerd's teardown). Every method of Runtime is safe for
// concurrent use.
//
// It never imports pkg/ipamd/...: the reconciler reaches it only through a
// CRI client on its socket.
package fakecri
