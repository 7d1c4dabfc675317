package ipamd

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/nodeinit"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/rpcserver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
)

// phase is one named step of start-up. The order is the contract: each
// phase may use what the phases before it built, never what comes after.
type phase struct {
	name string
	run  func(ctx context.Context) error
}

// phases is ipamd's start-up, in order:
//   - instance: the AWS client and the instance's limits (skipped with a
//     development pool);
//   - kubernetes: the API client, the node's max pods, node events;
//   - runtime: the container runtime, before the datastore, because with
//     one every address that joins the pool waits for the check against it;
//   - datastore: the store and its checkpointer;
//   - addresses: the node's ENIs and addresses (EC2, or the development
//     pool), which join the datastore pending;
//   - reconciler: the pod-IP reconciler on the runtime;
//   - pool: the pool manager, wired to the reconciler it signals;
//   - enisweep: the leaked-ENI sweep, unless disabled (it runs with Run);
//   - imdsrefresh: the IMDS refresh of the VPC's CIDR blocks and the
//     primary ENI's security groups (it runs with Run);
//   - restore: the checkpoint, then the check of every other address
//     against the runtime (the rebuild of a lost checkpoint);
//   - delqueue: the DELs the plugin queued while ipamd was down;
//   - podeni: with ENABLE_POD_ENI, the trunk ENI asked for (the node's
//     CNINode; failures only logged and counted);
//   - size: addresses of the other IPAM mode returned, the pool sized once
//     (when nothing is assignable yet; else by the pool manager's first
//     step, once serving);
//   - rpc: what the gRPC handlers serve from.
func (a *Agent) phases(st *startState) []phase {
	return []phase{
		{"instance", st.instance},
		{phaseKubernetes, a.connectK8s},
		{"runtime", func(context.Context) error { a.runtime, st.verifying = a.runtimeSource(); return nil }},
		{"datastore", st.datastore},
		{"addresses", func(ctx context.Context) error {
			if err := st.addresses(ctx); err != nil {
				return err
			}
			a.set = a.cardSet()
			return nil
		}},
		{"reconciler", func(context.Context) error {
			a.connectRuntime(a.runtime, st.verifying)
			a.connectCardRuntimes(a.runtime, st.verifying)
			return nil
		}},
		{"pool", func(context.Context) error { a.buildPool(); a.buildCardPools(); return nil }},
		{"enisweep", func(context.Context) error { a.buildENISweep(); return nil }},
		{"imdsrefresh", func(context.Context) error { a.buildIMDSRefresh(); return nil }},
		{"restore", func(ctx context.Context) error {
			if err := a.restore(ctx); err != nil {
				return err
			}
			return a.restoreCards(ctx)
		}},
		{"delqueue", func(context.Context) error {
			a.delq = &podip.DelQueue{Dir: a.opts.DelQueueDir, Every: a.opts.Config.Reconciler.Interval, Store: a.set,
				Rules: a.podRules(), Log: a.log, Metrics: a.metrics.podip}
			a.delq.Replay()
			return nil
		}},
		{"podeni", func(ctx context.Context) error { a.askForTrunkAtStart(ctx); return nil }},
		{"size", func(ctx context.Context) error { a.afterRestore(ctx); a.sizeCards(ctx); return nil }},
		{"rpc", func(context.Context) error { a.wireRPC(); return nil }},
	}
}

// startState carries what early phases decide for later ones.
type startState struct {
	a         *Agent
	limits    nodeinit.Limits
	pd        bool // prefix delegation, once the instance type is known
	verifying bool // addresses join pending
}

// phaseKubernetes is the phase that reaches the API server; the others
// are upstream's node initialisation.
const phaseKubernetes = "kubernetes"

// start runs the phases in order and stops at the first error. It observes
// upstream's start-up histograms either way: the node initialisation (every
// phase but the API server's) and the whole start since the process began.
func (a *Agent) start(ctx context.Context) error {
	st := &startState{a: a, pd: a.opts.Config.PrefixDelegation}
	var nodeInit time.Duration
	// One line names every phase's time, so how long a start took, and
	// where, reads from the log at the default level.
	times := []any{"beforeStart", time.Since(a.opts.StartedAt).Round(time.Millisecond).String()}
	for _, p := range a.phases(st) {
		t := time.Now()
		err := p.run(ctx)
		took := time.Since(t)
		if p.name != phaseKubernetes {
			nodeInit += took
		}
		if err != nil {
			reason := failedAPIServer
			if p.name != phaseKubernetes {
				reason = failedNodeInit
				a.metrics.observeNodeInit(false, nodeInit)
			}
			a.metrics.observeStartup(false, a.apiServer, reason, time.Since(a.opts.StartedAt))
			return err
		}
		a.log.Debug("start-up phase done", "phase", p.name, "took", took.String())
		times = append(times, p.name, took.Round(time.Millisecond).String())
	}
	a.log.Info("start-up phases done", append(times, "sinceProcessStart", time.Since(a.opts.StartedAt).Round(time.Millisecond).String())...)
	a.metrics.observeNodeInit(true, nodeInit)
	a.metrics.observeStartup(true, a.apiServer, "", time.Since(a.opts.StartedAt))
	return nil
}

func (st *startState) instance(ctx context.Context) error {
	a, cfg := st.a, st.a.opts.Config
	if a.opts.DevPool != nil {
		return nil
	}
	tags, reserved := awsutils.AdditionalENITags(cfg.AdditionalENITags)
	for _, k := range reserved {
		a.log.Warn("ADDITIONAL_ENI_TAGS: keys containing k8s.amazonaws.com are reserved; ignoring this one", "key", k)
	}
	if a.aws == nil {
		opts := cfg.AWSOptions(a.log)
		opts.AdditionalTags = tags
		c, err := awsutils.New(ctx, opts)
		if err != nil {
			return fmt.Errorf("AWS: %w", err)
		}
		a.aws = c
	}
	id := a.aws.InstanceIdentity()
	var err error
	if st.limits, err = nodeinit.InstanceLimits(ctx, a.aws, id.InstanceType); err != nil {
		return err
	}
	st.pd, err = st.limits.PrefixDelegation(st.pd, cfg.EnableIPv6, id.InstanceType, a.log)
	return err
}

func (st *startState) datastore(context.Context) error {
	a, cfg := st.a, st.a.opts.Config
	cp, err := datastore.NewFileCheckpointer(cfg.CheckpointPath)
	if err != nil {
		return err
	}
	a.store = datastore.New(datastore.Config{
		PrefixDelegation:   st.pd,
		IPv6:               cfg.EnableIPv6,
		Cooldown:           cfg.IPCooldown,
		Checkpointer:       timedCheckpointer{cp, a.metrics},
		Logger:             a.log,
		VerifyNewAddresses: st.verifying,
	})
	a.trackENISubnets()
	return nil
}

// addresses fills the datastore: from the development pool, or, after the
// host's node-wide setup, with node init from EC2 (which, in IPv4 mode,
// also sizes the pool manager).
func (st *startState) addresses(ctx context.Context) error {
	a, cfg := st.a, st.a.opts.Config
	if a.opts.DevPool != nil {
		a.log.Warn("DEVELOPMENT MODE: static synthetic pool, no EC2; never use this on a real node",
			"enis", a.opts.DevPool.ENIs, "perENI", a.opts.DevPool.PerENI, "prefixDelegation", cfg.PrefixDelegation)
		return a.opts.DevPool.Populate(a.store)
	}
	id := a.aws.InstanceIdentity()
	a.vpcSet.Set(id.VPCCIDRs)
	if cfg.EnableIPv6 {
		a.vpcSetV6.Set(id.VPCIPv6CIDRs)
	}
	if err := a.setupHostNetwork(ctx); err != nil {
		return err
	}
	nc := nodeinit.Config{Rules: eniRules(cfg), Provisioning: !cfg.DisableNetworkResourceProvisioning, CustomNetworking: cfg.CustomNetworking,
		PodENI: cfg.EnablePodENI,
		MaxENI: cfg.MaxENI, SubnetDiscovery: cfg.SubnetDiscovery, MaxPods: a.opts.MaxPods, MaxPodsFile: a.opts.MaxPodsFile,
		Log: a.log, Errors: a.metrics.errors}
	deps := nodeinit.Deps{AWS: a.aws, Store: a.store, SetupENI: a.setupENI}
	if cfg.EnableIPv6 {
		var err error
		a.newIPv6Prefix, err = nodeinit.IPv6(ctx, nc, deps)
		return err
	}
	n, err := nodeinit.IPv4(ctx, nc, deps, st.limits)
	a.leftOut, a.eniGroups = n.LeftOut, n.Groups
	if err != nil {
		return err
	}
	a.poolCfg = a.poolConfig(n)
	return st.startCards(ctx, nc)
}

// poolConfig is the pool manager's configuration: the sizing node init
// found, the warm targets and the timings.
func (a *Agent) poolConfig(n nodeinit.Node) *pool.Config {
	cfg, t, pd := a.opts.Config, a.opts.Timings, a.store.PrefixDelegation()
	return &pool.Config{
		Targets: warmpool.Config{
			WarmENITarget: cfg.WarmENITarget, WarmIPTarget: cfg.WarmIPTarget,
			MinimumIPTarget: cfg.MinimumIPTarget, WarmPrefixTarget: cfg.WarmPrefixTarget,
			MaxPods: n.MaxPods, MaxAddresses: n.MaxAddresses, SlotsPerENI: n.SlotsPerENI, PrefixDelegation: pd,
		},
		MaxENIs:               n.MaxENIs,
		UnmanagedENIs:         n.UnmanagedENIs,
		ENIRules:              eniRules(cfg),
		SlotsPerENI:           n.SlotsPerENI,
		Provisioning:          !cfg.DisableNetworkResourceProvisioning,
		SubnetDiscovery:       cfg.SubnetDiscovery,
		CustomNetworking:      cfg.CustomNetworking,
		PodENI:                cfg.EnablePodENI,
		InstanceType:          a.aws.InstanceIdentity().InstanceType,
		Interval:              t.PoolInterval,
		SyncInterval:          t.ENISyncInterval,
		DecreaseInterval:      t.DecreaseInterval,
		SubnetCooldown:        t.SubnetCooldown,
		MinENILifetime:        t.MinENILifetime,
		ReturnedCacheTTL:      t.ENISyncInterval,
		LeakHookInterval:      t.LeakHookInterval,
		EC2VerifyInterval:     t.EC2VerifyInterval,
		SubnetRecheckInterval: t.SubnetRecheckInterval,
		DisputeConfirmAfter:   t.DisputeConfirmAfter,
		ENIViewFromIMDS:       cfg.IMDSOnlyMode,
		WarmStartSpread:       cfg.WarmStartSpread,
	}
}

// afterRestore marks ENIs whose subnets are excluded from pod IPs, returns
// addresses of the mode ipamd no longer uses (secondary IPs after switching
// to prefix delegation, or prefixes after switching back) once nothing
// holds them, then sizes the pool once: before serving when no address is
// assignable yet (a fresh node), else as the pool manager starts.
func (a *Agent) afterRestore(ctx context.Context) {
	if a.pool == nil {
		return
	}
	// As upstream's node init: ENIs in subnets tagged out of pod IPs are
	// marked before any ADD is served (their idle addresses go back to EC2
	// at the first step).
	a.pool.CheckExcludedSubnets(ctx)
	if !a.pool.Config().Provisioning {
		return
	}
	a.imds.RefreshSecurityGroups(ctx) // as upstream's node init: before the pool grows
	other := !a.store.PrefixDelegation()
	if stale := a.store.FreeCIDRs(other, math.MaxInt); len(stale) > 0 {
		a.log.Info("returning idle addresses of the other IPAM mode", "count", len(stale), "prefixes", other)
		a.pool.ReturnToEC2(ctx, stale, other)
	}
	if a.store.Stats().AssignableIPs() > 0 {
		// ADDs can be served from what the node has (a restart): the first
		// step, growth to the warm targets or a shrink, is the pool
		// manager's first act once the socket listens, not a wait before.
		a.pool.StepFirstOnRun()
		return
	}
	a.pool.Step(ctx)
}

// wireRPC sets what the gRPC handlers serve from.
func (a *Agent) wireRPC() {
	cfg := a.opts.Config
	deps := rpcserver.Deps{Store: a.set, Stats: a.set, Explain: a.addFailures().Explain, ExplainCard: a.explainCard}
	if a.podWarnings != nil {
		deps.Warn = a.podWarnings
	}
	if a.podIPs != nil {
		deps.Pods = a.podIPs
	}
	if a.pool != nil {
		deps.OnExhausted = a.wakePools
	}
	a.wirePodENI(&deps)
	if a.recon != nil {
		deps.Reclaim = a.reclaimForAdd
		deps.GC = a.collectGarbage
	}
	set := rpcserver.Settings{Version: version.RPCVersion,
		NetworkPolicyMode: cfg.NetworkPolicyMode, EnableMultiNIC: cfg.EnableMultiNIC,
		ExternalSNAT: cfg.Network.ExternalSNAT, ExcludeSNATCIDRs: cfg.ExcludeSNATStrings(),
		VPCCIDRs: a.vpcSet.Strings, IPv6: cfg.EnableIPv6, VPCv6CIDRs: a.vpcSetV6.Strings}
	if a.aws != nil {
		id := a.aws.InstanceIdentity()
		set.InstanceID, set.Region = id.InstanceID, id.Region
		// As upstream: the node's address of the cluster's family.
		if cfg.EnableIPv6 && id.PrimaryIPv6.IsValid() {
			set.NodeIPv6 = id.PrimaryIPv6.String()
		} else if !cfg.EnableIPv6 && id.PrimaryIP.IsValid() {
			set.NodeIPv4 = id.PrimaryIP.String()
		}
	}
	a.rpc = rpcserver.Options{Deps: deps, Settings: set,
		Observability: rpcserver.Observability{Errors: a.metrics.errors, Log: a.log}}
}
