package ipamd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/eniconfig"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
)

// Security groups for pods (ENABLE_POD_ENI=true): ipamd asks the VPC
// resource controller for a trunk ENI by adding the SecurityGroupsForPods
// feature to its node's CNINode, at start and then at every pool step
// (IPv4) or every look for the trunk (IPv6) until the trunk is attached.
// In IPv4 it asks only while network card 0 has a free ENI slot for the
// trunk. It never asks on an instance type that cannot have a trunk
// (pool.TrunkWanted), and says so once at start. Under custom networking
// the same patch names the node's ENIConfig (feature CustomNetworking),
// unless it is "default", so the trunk goes where the node's ENIs go; an
// ENIConfig name that cannot be read means nothing is asked that time
// (upstream fails its start instead). A failure is logged and counted
// (awscni_pod_eni_error_count{fn="tryEnableSecurityGroupsForPods"}) and
// never stops ipamd: the next step asks again.

// errNoCNINodeClient: pod ENI is on but ipamd has no client for CNINodes
// (no MY_NODE_NAME, or the client could not be built).
var errNoCNINodeClient = errors.New("no Kubernetes client for the node's CNINode (MY_NODE_NAME unset, or the client could not be built)")

// fnTryEnableSGP is upstream's error label for a failed ask.
const fnTryEnableSGP = "tryEnableSecurityGroupsForPods"

// trunkAskRecheck spaces the asks once the CNINode was seen to hold the
// features: the trunk is then the controller's to attach, and asking again
// at every step would only read the CNINode every few seconds.
const trunkAskRecheck = time.Minute

// trunkAskEvidence is what the decision to ask for a trunk rests on.
type trunkAskEvidence struct {
	PodENI bool
	// InstanceType: some types can never have a trunk (pool.TrunkWanted).
	InstanceType string
	IPv6         bool
	Counts       pool.ENICounts // network card 0
	// CustomNetworking and ENIConfig (the node's ENIConfig name, "" when
	// it could not be read).
	CustomNetworking bool
	ENIConfig        string
	// SinceConfirmed is the time since the CNINode was last seen holding
	// what was asked (negative: never).
	SinceConfirmed time.Duration
}

// trunkFeatures decides which features to ask for now (none: do not ask).
// Nothing unless a trunk is wanted (pod ENI on an instance type that can
// have one), nothing within trunkAskRecheck of a confirmation, and nothing
// under custom networking while the ENIConfig name is unknown (asking
// without it could put the trunk in the wrong subnet). Otherwise
// SecurityGroupsForPods only in IPv6 or when network card 0 has room for
// one more ENI; CustomNetworking, valued by the ENIConfig's name, with
// custom networking and an ENIConfig other than "default" (upstream adds
// it with pod ENI on, whatever the room).
func trunkFeatures(e trunkAskEvidence) []k8sapi.CNINodeFeature {
	if !pool.TrunkWanted(e.PodENI, e.InstanceType) || (e.SinceConfirmed >= 0 && e.SinceConfirmed < trunkAskRecheck) {
		return nil
	}
	if e.CustomNetworking && e.ENIConfig == "" {
		return nil
	}
	var fs []k8sapi.CNINodeFeature
	if e.CustomNetworking && e.ENIConfig != eniconfig.DefaultName {
		fs = append(fs, k8sapi.CNINodeFeature{Name: k8sapi.FeatureCustomNetworking, Value: e.ENIConfig})
	}
	if e.IPv6 || e.Counts.FreeSlots() > 0 {
		fs = append(fs, k8sapi.CNINodeFeature{Name: k8sapi.FeatureSecurityGroupsForPods})
	}
	return fs
}

// cniNodes is how ipamd writes its node's CNINode (nil: no client).
type cniNodes func(ctx context.Context, node string, fs ...k8sapi.CNINodeFeature) (changed bool, err error)

// connectCNINode sets up the CNINode writer when pod ENI is on.
func (a *Agent) connectCNINode() {
	cfg := a.opts.Config
	if !cfg.EnablePodENI || cfg.NodeName == "" {
		return
	}
	dyn := a.opts.K8sDynamic
	if dyn == nil {
		d, err := k8sapi.NewDynamicClient(a.k8sClientOptions())
		if err != nil {
			a.log.Error("ENABLE_POD_ENI=true: no client for the node's CNINode; no trunk ENI will be asked for", "error", err)
			return
		}
		dyn = d
	}
	a.cniNode = func(ctx context.Context, node string, fs ...k8sapi.CNINodeFeature) (bool, error) {
		return k8sapi.AddCNINodeFeatures(ctx, dyn, node, fs...)
	}
}

// tryEnableSecurityGroupsForPods asks for a trunk ENI when trunkFeatures
// says so, with network card 0's ENI counts c (IPv4).
func (a *Agent) tryEnableSecurityGroupsForPods(ctx context.Context, c pool.ENICounts) {
	cfg := a.opts.Config
	if !cfg.EnablePodENI {
		return
	}
	since := time.Duration(-1)
	if !a.trunkAskConfirmed.IsZero() {
		since = time.Since(a.trunkAskConfirmed)
	}
	ev := trunkAskEvidence{PodENI: true, InstanceType: a.instanceType(), IPv6: cfg.EnableIPv6, Counts: c,
		CustomNetworking: cfg.CustomNetworking, SinceConfirmed: since}
	var nameErr error
	if cfg.CustomNetworking && pool.TrunkWanted(true, ev.InstanceType) && !(since >= 0 && since < trunkAskRecheck) {
		ev.ENIConfig, nameErr = a.eniConfigName(ctx)
	}
	fs := trunkFeatures(ev)
	if len(fs) == 0 {
		switch {
		case nameErr != nil:
			a.trunkAskFailed(nil, fmt.Errorf("read the node's ENIConfig name for its CNINode: %w", nameErr))
		case !cfg.EnableIPv6 && ev.SinceConfirmed < 0 && pool.TrunkWanted(true, ev.InstanceType):
			a.log.Debug("ENABLE_POD_ENI=true: no ENI slot free for a trunk; not asking", "enis", c.ENIs, "unmanaged", c.Unmanaged, "maxENIs", c.MaxENIs)
		}
		return
	}
	changed, err := false, errNoCNINodeClient
	if a.cniNode != nil {
		changed, err = a.cniNode(ctx, cfg.NodeName, fs...)
	}
	if err != nil {
		a.trunkAskFailed(fs, err)
		return
	}
	a.trunkAskErr = ""
	a.trunkAskConfirmed = time.Now()
	if changed {
		a.log.Info("ENABLE_POD_ENI=true: asked the VPC resource controller for a trunk ENI", "node", cfg.NodeName, "features", fs)
	}
}

// trunkAskFailed counts a failed ask and logs it; asked again at every
// step, the same failure is logged once a minute.
func (a *Agent) trunkAskFailed(fs []k8sapi.CNINodeFeature, err error) {
	a.metrics.podENIErrors.WithLabelValues(fnTryEnableSGP).Inc()
	if msg := err.Error(); msg != a.trunkAskErr || time.Since(a.trunkAskLogged) >= trunkAskRecheck {
		a.trunkAskErr, a.trunkAskLogged = msg, time.Now()
		a.log.Error("ENABLE_POD_ENI=true: could not ask for a trunk ENI through the node's CNINode; asking again at the next step",
			"node", a.opts.Config.NodeName, "features", fs, "error", err)
	}
}

// eniConfigName is the node's ENIConfig name, read now; an empty name is
// an error (it names no ENIConfig).
func (a *Agent) eniConfigName(ctx context.Context) (string, error) {
	if a.eniConfigs == nil {
		return "", errors.New("no ENIConfig reader")
	}
	name, err := a.eniConfigs.SelectedName(ctx)
	if err == nil && name == "" {
		err = errors.New("the node's ENIConfig label or annotation is empty")
	}
	return name, err
}

// instanceType is the node's EC2 instance type ("" when unknown, which
// counts as trunking-compatible).
func (a *Agent) instanceType() string {
	if a.aws == nil {
		return ""
	}
	return a.aws.InstanceIdentity().InstanceType
}

// noteTrunkImpossible says once, at start, that pod ENI is on where no
// trunk can ever come.
func (a *Agent) noteTrunkImpossible() {
	if it := a.instanceType(); a.opts.Config.EnablePodENI && !pool.TrunkWanted(true, it) {
		a.log.Warn("ENABLE_POD_ENI=true: this instance type cannot have a trunk ENI, so pods with security groups cannot run here; "+
			"no trunk is asked for and every ENI slot serves pods", "instanceType", it)
	}
}

// askForTrunkAtStart is node init's ask (upstream's, before the pool is
// first sized): with network card 0's counts in IPv4, unconditionally (as
// to room) in IPv6.
func (a *Agent) askForTrunkAtStart(ctx context.Context) {
	if !a.opts.Config.EnablePodENI || a.opts.DevPool != nil {
		return
	}
	a.noteTrunkImpossible()
	var c pool.ENICounts
	if a.pool != nil {
		c = a.pool.ENICounts()
	}
	a.tryEnableSecurityGroupsForPods(ctx, c)
}
