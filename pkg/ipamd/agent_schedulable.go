package ipamd

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
)

// nodeReadTimeout bounds the first read of the node's taints at start.
const nodeReadTimeout = 3 * time.Second

// watchSchedulability follows the node's unschedulable taint for the pool
// manager unless AWS_MANAGE_ENIS_NON_SCHEDULABLE=true (then ENIs are
// managed whatever the node's state). Without the API server the node
// counts as schedulable, as upstream does when it cannot read the node.
func (a *Agent) watchSchedulability(ctx context.Context, client kubernetes.Interface) {
	cfg := a.opts.Config
	if cfg.ManageENIsNonSchedulable || a.opts.DevPool != nil {
		return
	}
	if client == nil || cfg.NodeName == "" {
		a.log.Info("AWS_MANAGE_ENIS_NON_SCHEDULABLE=false but the node cannot be read (no API server or MY_NODE_NAME): " +
			"the pool is managed as on a schedulable node")
		return
	}
	a.sched = k8sapi.WatchNodeSchedulability(ctx, client, cfg.NodeName, nodeReadTimeout, a.log)
}
