package ipamcheck

import (
	"context"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
)

// listSandboxes lists every pod sandbox, in every state, the way ipamd's
// reconciler does: on endpoint when set (CRI_RUNTIME_ENDPOINT's forms),
// else on the candidate that lists ownPod (aws-node's pod, MY_POD_NAME;
// "" when not known), else on the first that lists sandboxes. It returns
// the socket it used.
func listSandboxes(ctx context.Context, endpoint string, candidates []string, ownPod string, timeout time.Duration) ([]cri.Sandbox, string, error) {
	rt, list, err := openAndList(ctx, endpoint, candidates, ownPod, timeout)
	if rt == nil {
		return nil, "", err
	}
	defer rt.Close()
	return list, rt.Endpoint(), err
}

// openAndList is listSandboxes keeping the runtime open, for the status
// calls of sandboxes that hold no allocation (outside.go). The caller
// closes a non-nil runtime.
func openAndList(ctx context.Context, endpoint string, candidates []string, ownPod string, timeout time.Duration) (*cri.Runtime, []cri.Sandbox, error) {
	rt, err := cri.NewRuntime(cri.Config{Endpoint: endpoint, Candidates: candidates, OwnPod: ownPod, Timeout: timeout})
	if err != nil {
		return nil, nil, err
	}
	list, err := rt.ListSandboxes(ctx)
	return rt, list, err
}
