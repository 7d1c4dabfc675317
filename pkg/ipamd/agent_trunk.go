package ipamd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
)

// The trunk ENI (security groups for pods) as the agent knows it: set up
// like a secondary ENI, in the datastore as the trunk, and the parent link
// of branch pods' VLANs, which the RPC side finds with trunkLinkIndex.

// errNoTrunk: no trunk ENI is attached (or it is not set up yet).
var errNoTrunk = errors.New("no trunk ENI attached")

// trunkLinkAttempts and trunkLinkInterval bound the link lookup by MAC
// during an ADD (upstream: 5 tries, 100 ms apart).
const (
	trunkLinkAttempts = 5
	trunkLinkInterval = 100 * time.Millisecond
)

// trunkState is the trunk ENI's MAC once set up, and how its link is
// found (tests replace linkIndex).
type trunkState struct {
	mu  sync.Mutex
	mac string
	// linkIndex finds a link's ifindex by MAC (nil: netlink in ipamd's
	// network namespace, the host's).
	linkIndex func(mac string) (int, error)
}

func (t *trunkState) set(mac string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mac = mac
}

func (t *trunkState) get() (mac string, index func(string) (int, error)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	index = t.linkIndex
	if index == nil {
		index = linkIndexByMAC
	}
	return t.mac, index
}

// trunkLinkIndex is the host ifindex of the trunk ENI's link (found by its
// MAC), for a branch pod's VLAN; errNoTrunk when the datastore holds no
// trunk.
func (a *Agent) trunkLinkIndex() (int, error) {
	mac, index := a.trunk.get()
	if mac == "" || a.store == nil || !pool.HasTrunk(a.store.ENISummaries()) {
		return 0, errNoTrunk
	}
	var err error
	for attempt := 1; attempt <= trunkLinkAttempts; attempt++ {
		var i int
		if i, err = index(mac); err == nil {
			return i, nil
		}
		if attempt < trunkLinkAttempts {
			time.Sleep(trunkLinkInterval)
		}
	}
	return 0, fmt.Errorf("trunk ENI link %s: %w", mac, err)
}

// linkIndexByMAC looks the link up in the current network namespace.
func linkIndexByMAC(mac string) (int, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(mac))
	if err != nil {
		return 0, fmt.Errorf("parse MAC %q: %w", mac, err)
	}
	links, err := netlink.LinkList()
	if err != nil {
		return 0, fmt.Errorf("list links: %w", err)
	}
	for _, l := range links {
		if at := l.Attrs(); at != nil && at.HardwareAddr.String() == hw.String() {
			return at.Index, nil
		}
	}
	return 0, fmt.Errorf("no link with MAC %s", hw)
}

// recordTrunk remembers the trunk's MAC once its link is set up.
func (a *Agent) recordTrunk(e awsutils.ENI) {
	if pool.IsTrunk(e) {
		a.trunk.set(e.MAC)
	}
}

// watchIPv6Trunk is the IPv6 side of security groups for pods: there is
// no pool manager in IPv6 mode, so until the trunk is attached this job,
// every pool interval, asks for it again (the CNINode may not have existed
// at start: the controller creates it, racing ipamd; once an ask is
// confirmed, asks are a minute apart) and looks for it (IMDS first; EC2,
// which alone shows the interface type, only when IMDS shows an ENI the
// datastore does not have), then sets it up, adds it to the datastore, and
// returns. It runs only where a trunk is wanted (pool.TrunkWanted).
type ipv6TrunkWatch struct{ a *Agent }

func (w ipv6TrunkWatch) Run(ctx context.Context) {
	a := w.a
	every := a.opts.Timings.PoolInterval
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if w.pass(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass reports whether the trunk is in the datastore (done).
func (w ipv6TrunkWatch) pass(ctx context.Context) bool {
	a := w.a
	inStore := a.store.ENISummaries()
	if pool.HasTrunk(inStore) {
		return true
	}
	known := map[string]bool{}
	for _, s := range inStore {
		known[s.Info.ID] = true
	}
	a.tryEnableSecurityGroupsForPods(ctx, pool.ENICounts{}) // IPv6 asks whatever the counts
	attached, err := a.aws.AttachedENIs(ctx)
	if err != nil {
		a.log.Debug("ENABLE_POD_ENI=true: IMDS unavailable while waiting for the trunk ENI", "error", err)
		return false
	}
	unknown := false
	for _, m := range attached {
		if m.NetworkCard == 0 && !known[m.ENIID] {
			unknown = true
		}
	}
	if !unknown {
		return false
	}
	enis, err := a.aws.InstanceENIs(ctx)
	if err != nil {
		a.log.Warn("ENABLE_POD_ENI=true: could not list the instance's ENIs while waiting for the trunk ENI", "error", err)
		return false
	}
	id := a.aws.InstanceIdentity()
	for _, e := range enis {
		if !pool.IsTrunk(e) || !e.Attached || e.NetworkCard != 0 || !pool.IsManaged(e, id, eniRules(a.opts.Config)) {
			continue
		}
		if err := a.addIPv6Trunk(ctx, e); err != nil {
			a.metrics.errors.WithLabelValues("waitENIAttachedMaxRetryExceeded").Inc()
			a.log.Error("ENABLE_POD_ENI=true: could not set up the trunk ENI; trying again", "eni", e.ID, "error", err)
			return false
		}
		a.log.Info("ENABLE_POD_ENI=true: trunk ENI set up", "eni", e.ID, "device", e.DeviceNumber)
		return true
	}
	return false
}

// addIPv6Trunk sets the trunk's link up with its first IPv6 address (an
// IPv6 node's ENIs are addressed in IPv6; EC2 gives subnets /64s), then
// adds it to the datastore (no addresses join the pool from it).
func (a *Agent) addIPv6Trunk(ctx context.Context, e awsutils.ENI) error {
	host := e
	if len(e.IPv6Addrs) > 0 {
		host.PrimaryIP = e.IPv6Addrs[0]
	}
	if err := a.setupENI(ctx, host); err != nil {
		return err
	}
	return pool.AddENI(a.store, e)
}
