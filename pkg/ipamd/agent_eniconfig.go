package ipamd

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/eniconfig"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
)

// eniConfigSource is the node's ENIConfig as ipamd uses it: its name for
// /v1/eni-configs, and the whole object for each new ENI under custom
// networking (*eniconfig.Reader).
type eniConfigSource interface {
	SelectedName(ctx context.Context) (string, error)
	Selected(ctx context.Context) (eniconfig.Spec, error)
}

// connectENIConfig sets up reading the node's ENIConfig whenever ipamd has
// an API client and knows its node (upstream serves /v1/eni-configs with or
// without custom networking). Custom networking cannot run without it. At
// start the ENIConfig is only checked and reported: one that is missing or
// wrong stops new ENIs, not ipamd, which keeps serving the addresses the
// node has and uses the ENIConfig once it is fixed.
func (a *Agent) connectENIConfig(ctx context.Context, client kubernetes.Interface) error {
	cfg := a.opts.Config
	if client == nil || cfg.NodeName == "" {
		if cfg.CustomNetworking {
			return errors.New("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true needs the Kubernetes API client and MY_NODE_NAME to read the node's ENIConfig")
		}
		return nil
	}
	dyn := a.opts.K8sDynamic
	if dyn == nil {
		d, err := k8sapi.NewDynamicClient(a.k8sClientOptions())
		if err != nil {
			if cfg.CustomNetworking {
				return fmt.Errorf("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true: client for ENIConfig objects: %w", err)
			}
			a.log.Warn("no client for ENIConfig objects; /v1/eni-configs still names the node's ENIConfig", "error", err)
		}
		dyn = d
	}
	r := eniconfig.NewReader(client, dyn, cfg.NodeName, eniconfig.Keys{Annotation: cfg.ENIConfigAnnotation, Label: cfg.ENIConfigLabel})
	a.eniConfigs = r
	if !cfg.CustomNetworking {
		return nil
	}
	spec, err := r.Selected(ctx)
	if err != nil {
		a.metrics.errors.WithLabelValues("eniConfigUnusable").Inc()
		a.log.Error("custom networking: the node's ENIConfig cannot be used yet; no new ENI until it can, "+
			"pods get addresses from the ENIs the node already has", "node", cfg.NodeName, "error", err)
		return nil
	}
	a.log.Info("custom networking: new ENIs use the node's ENIConfig", "eniConfig", spec.Name,
		"subnet", spec.Subnet, "securityGroups", spec.SecurityGroups)
	return nil
}

// placement is the pool manager's view of the node's ENIConfig.
func (a *Agent) placement(ctx context.Context) (pool.Placement, error) {
	if a.eniConfigs == nil {
		return pool.Placement{}, errors.New("no ENIConfig reader")
	}
	spec, err := a.eniConfigs.Selected(ctx)
	return pool.Placement{Config: spec.Name, SubnetID: spec.Subnet, SecurityGroups: spec.SecurityGroups}, err
}
