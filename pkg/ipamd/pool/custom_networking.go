package pool

import (
	"context"
	"errors"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
)

// Custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG): every new ENI goes
// in the subnet, with the security groups, of the node's ENIConfig, read
// again for each new ENI, so a changed label or ENIConfig applies to the
// next ENI while the ones attached stay as they are. The primary ENI gives
// pods no address (the agent marks it excluded), so it does not count
// towards the pool's address capacity. When the ENIConfig cannot be used
// (missing, invalid, a subnet outside the instance's VPC or AZ) no ENI is
// made: the pool keeps serving what it has, the failure is logged, counted
// and posted on the node, and the next pool step tries again.

// Placement is where a new ENI goes under custom networking.
type Placement struct {
	Config         string   // the ENIConfig's name, for logs and events
	SubnetID       string   // spec.subnet
	SecurityGroups []string // spec.securityGroups; empty: the primary ENI's groups
}

// PlacementFunc reads the node's ENIConfig.
type PlacementFunc func(ctx context.Context) (Placement, error)

// Error labels (awscni_ipamd_error_count{fn}) and the event reason of an
// unusable ENIConfig.
const (
	fnENIConfigUnusable     = "eniConfigUnusable"
	reasonENIConfigUnusable = "ENIConfigUnusable"
)

// placementLogGap bounds how often the same placement failure is logged;
// pool steps retry every few seconds.
const placementLogGap = time.Minute

// podENIs is how many ENIs may give pods addresses (PodENIs).
func (p *Manager) podENIs() int {
	return PodENIs(p.cfg.MaxENIs, p.unmanaged, p.cfg.CustomNetworking, TrunkWanted(p.cfg.PodENI, p.cfg.InstanceType))
}

// customPlacement reads the node's ENIConfig for a new ENI; false (after
// reporting) when it cannot be used now.
func (p *Manager) customPlacement(ctx context.Context) (Placement, bool) {
	if p.Placement == nil {
		p.placementFailed(ctx, Placement{}, errors.New("custom networking is on but no ENIConfig reader is wired"))
		return Placement{}, false
	}
	pl, err := p.Placement(ctx)
	if err != nil {
		p.placementFailed(ctx, pl, err)
		return Placement{}, false
	}
	return pl, true
}

// placementFailed reports an ENIConfig that cannot be used: counted every
// time, logged when the error changes or once a minute, posted as a node
// event (rate-limited per reason by the poster).
func (p *Manager) placementFailed(ctx context.Context, pl Placement, err error) {
	p.Errors.WithLabelValues(fnENIConfigUnusable).Inc()
	now := p.now()
	msg := err.Error()
	if msg != p.placementErr || now.Sub(p.placementLogged) >= placementLogGap {
		p.placementErr, p.placementLogged = msg, now
		p.Log.Error("custom networking: no new ENI until the node's ENIConfig can be used; serving the addresses the node has",
			"eniConfig", pl.Config, "subnet", pl.SubnetID, "error", err)
	}
	p.publishPauses("")
	if p.Events != nil {
		p.Events.Warning(ctx, reasonENIConfigUnusable, "CreateENI",
			"custom networking: cannot create an ENI from the node's ENIConfig: "+msg)
	}
}

// placementRecovered logs once that ENIs are being made again.
func (p *Manager) placementRecovered(pl Placement) {
	if p.placementErr == "" {
		return
	}
	p.placementErr = ""
	p.publishPauses("")
	p.Log.Info("custom networking: the node's ENIConfig can be used again", "eniConfig", pl.Config, "subnet", pl.SubnetID)
}

// isPlacementError tells an AllocENI failure caused by the ENIConfig's
// subnet or security groups from other EC2 failures.
func isPlacementError(err error) bool { return errors.Is(err, awsutils.ErrPlacement) }
