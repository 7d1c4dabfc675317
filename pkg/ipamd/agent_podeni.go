package ipamd

import (
	"context"
	"errors"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/eniconfig"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
)

// Security groups for pods (ENABLE_POD_ENI=true): ipamd asks the VPC
// resource controller for a trunk ENI by adding the SecurityGroupsForPods
// feature to its node's CNINode, at start and (IPv4) at every pool step
// until the trunk is attached. In IPv4 it asks only while network card 0
// has a free ENI slot for the trunk. Under custom networking the same
// patch names the node's ENIConfig (feature CustomNetworking), unless it
// is "default", so the trunk goes where the node's ENIs go. A failure is
// logged and counted (awscni_pod_eni_error_count{fn=
// "tryEnableSecurityGroupsForPods"}) and never stops ipamd: the next step
// asks again.

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
	IPv6   bool
	Counts pool.ENICounts // network card 0
	// CustomNetworking and ENIConfig (the node's ENIConfig name, "" when
	// unknown).
	CustomNetworking bool
	ENIConfig        string
	// SinceConfirmed is the time since the CNINode was last seen holding
	// what was asked (negative: never).
	SinceConfirmed time.Duration
}

// trunkFeatures decides which features to ask for now (none: do not ask).
// SecurityGroupsForPods only in IPv6 or when network card 0 has room for
// one more ENI (ENIs < limit - unmanaged); CustomNetworking, valued by the
// ENIConfig's name, with custom networking and an ENIConfig other than
// "default" (upstream adds it with pod ENI on, whatever the room). Nothing
// within trunkAskRecheck of a confirmation.
func trunkFeatures(e trunkAskEvidence) []k8sapi.CNINodeFeature {
	if !e.PodENI || (e.SinceConfirmed >= 0 && e.SinceConfirmed < trunkAskRecheck) {
		return nil
	}
	var fs []k8sapi.CNINodeFeature
	if e.CustomNetworking && e.ENIConfig != "" && e.ENIConfig != eniconfig.DefaultName {
		fs = append(fs, k8sapi.CNINodeFeature{Name: k8sapi.FeatureCustomNetworking, Value: e.ENIConfig})
	}
	if e.IPv6 || e.Counts.ENIs < e.Counts.MaxENIs-e.Counts.Unmanaged {
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
	ev := trunkAskEvidence{PodENI: true, IPv6: cfg.EnableIPv6, Counts: c, CustomNetworking: cfg.CustomNetworking, SinceConfirmed: since}
	if cfg.CustomNetworking && a.eniConfigs != nil {
		name, err := a.eniConfigs.SelectedName(ctx)
		if err != nil {
			a.log.Warn("ENABLE_POD_ENI=true: could not read the node's ENIConfig name for its CNINode", "error", err)
		}
		ev.ENIConfig = name
	}
	fs := trunkFeatures(ev)
	if len(fs) == 0 {
		if !cfg.EnableIPv6 && ev.SinceConfirmed < 0 {
			a.log.Debug("ENABLE_POD_ENI=true: no ENI slot free for a trunk; not asking", "enis", c.ENIs, "unmanaged", c.Unmanaged, "maxENIs", c.MaxENIs)
		}
		return
	}
	changed, err := false, errNoCNINodeClient
	if a.cniNode != nil {
		changed, err = a.cniNode(ctx, cfg.NodeName, fs...)
	}
	if err != nil {
		a.metrics.podENIErrors.WithLabelValues(fnTryEnableSGP).Inc()
		// Asked again at every pool step: the same failure is logged once
		// a minute.
		if msg := err.Error(); msg != a.trunkAskErr || time.Since(a.trunkAskLogged) >= trunkAskRecheck {
			a.trunkAskErr, a.trunkAskLogged = msg, time.Now()
			a.log.Error("ENABLE_POD_ENI=true: could not ask for a trunk ENI through the node's CNINode; asking again at every pool step",
				"node", cfg.NodeName, "features", fs, "error", err)
		}
		return
	}
	a.trunkAskErr = ""
	a.trunkAskConfirmed = time.Now()
	if changed {
		a.log.Info("ENABLE_POD_ENI=true: asked the VPC resource controller for a trunk ENI", "node", cfg.NodeName, "features", fs)
	}
}

// askForTrunkAtStart is node init's ask (upstream's, before the pool is
// first sized): with network card 0's counts in IPv4, unconditionally (as
// to room) in IPv6.
func (a *Agent) askForTrunkAtStart(ctx context.Context) {
	if !a.opts.Config.EnablePodENI || a.opts.DevPool != nil {
		return
	}
	var c pool.ENICounts
	if a.pool != nil {
		c = a.pool.ENICounts()
	}
	a.tryEnableSecurityGroupsForPods(ctx, c)
}
