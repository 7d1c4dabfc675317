package main

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
	rpc "github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/ipamdwire"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
)

// cmdDel handles DEL. It never fails because ipamd is away: pod deletion
// must not block on the node agent. The release is queued (pkg/delqueue) for ipamd to replay
// and the node-side state is removed from what prevResult says.
//
// Order of work, chosen so a new pod that was already handed the same
// address is never hurt:
//  1. DelNetwork (or queue it when ipamd does not answer);
//  2. find the node end of each of the pod's veths (one per address: eth0,
//     then mNicIf<i> for a multi-NIC pod) from inside the pod's namespace
//     (driver.HostPeer), if the namespace is still there;
//  3. per address, under the address's lock (package hostlock, which an
//     ADD holds while adding its route and rules): delete the main-table
//     route through that node end, then remove the address's rules unless
//     another interface still routes the address (a new pod's ADD of the
//     same address is then either not begun or finished, never half seen);
//  4. leave the veth pair to the runtime, which deletes the namespace right
//     after a DEL and the pair with it (upstream does the same; deleting a
//     veth costs the kernel about 20 ms). Only when the namespace has
//     already outlived a completed DEL (this DEL repeats one ipamd has
//     seen) is the pair deleted here.
func cmdDel(args *skel.CmdArgs) error { return runDel(args) }

// runDel is cmdDel with options for the driver's release of each address
// on the node (tests pause a DEL in its ownership check with them).
func runDel(args *skel.CmdArgs, release ...driver.ReleaseOption) error {
	inv, done, err := start("DEL", args, false)
	if err != nil {
		return err
	}
	defer done()
	inv.releaseOpts = release
	began := time.Now()
	if err := inv.del(); err != nil {
		inv.log.Error("DEL failed", "error", err, "took", time.Since(began).String())
		return err
	}
	inv.log.Info("DEL done", "took", time.Since(began).String())
	return nil
}

// del releases the pod's address at ipamd and removes the pod's node-side
// state according to what became of the address.
func (inv *invocation) del() error {
	inv.log.Info("DEL", "netns", inv.args.Netns, "network", inv.conf.Name)
	prev := inv.prevInfo()
	r, err := inv.release(prev)
	if err != nil {
		return err
	}
	switch r.outcome {
	case branchPod:
		return inv.teardownBranch(r.vlan, r.ips)
	case released:
		return inv.removeReleased(onPrevInterfaces(r.released, prev))
	default: // alreadyReleased, queued: no reply names the addresses
		inv.removeFromPrev(prev, r.outcome == alreadyReleased)
		return nil
	}
}

// releaseOutcome is what became of the pod's address at ipamd.
type releaseOutcome int

const (
	// branchPod: a branch-ENI pod; its address is not ipamd's.
	branchPod releaseOutcome = iota
	// released: ipamd released the addresses its reply names.
	released
	// alreadyReleased: ipamd held nothing (an earlier DEL completed).
	alreadyReleased
	// queued: ipamd did not release; the DEL is queued for it to replay.
	queued
)

// releaseResult is an outcome and, for branchPod, the pod's addresses and
// VLAN; for released, the addresses ipamd released, each on its pod
// interface.
type releaseResult struct {
	outcome  releaseOutcome
	vlan     int
	ips      []net.IP
	released []attachment
}

// release asks ipamd to release the pod's address, unless prevResult shows
// a branch-ENI pod (set up by this plugin or upstream's; its address
// belongs to the VPC resource controller). When ipamd does not release it, the DEL is
// queued; only a refusal (Success=false) fails the DEL.
func (inv *invocation) release(prev *prevInfo) (releaseResult, error) {
	if prev != nil && prev.VlanID != 0 {
		return releaseResult{outcome: branchPod, vlan: prev.VlanID, ips: prev.ips()}, nil
	}
	reply, err := inv.callDelNetwork()
	switch {
	case err == nil && !reply.Success:
		return releaseResult{}, errors.New("ipamd could not release the pod's address")
	case err == nil && reply.PodVlanId == 0 && len(reply.IPAllocationMetadata) == 0:
		// Success naming no address: ipamd held nothing (with
		// ENABLE_POD_ENI, the answer for a pod already gone from the API
		// server), the same as "unknown pod".
		inv.log.Info("ipamd holds nothing for this pod (already released)")
		return releaseResult{outcome: alreadyReleased}, nil
	case err == nil:
		inv.logReleased(reply)
		if reply.PodVlanId != 0 {
			return releaseResult{outcome: branchPod, vlan: int(reply.PodVlanId), ips: replyAddresses(reply)}, nil
		}
		return releaseResult{outcome: released, released: releasedAttachments(reply, inv.args.IfName)}, nil
	case isUnknownPod(err):
		inv.log.Info("ipamd holds nothing for this pod (already released)")
		return releaseResult{outcome: alreadyReleased}, nil
	default:
		inv.log.Warn("ipamd did not release the address; queueing the DEL and tearing down from prevResult", "error", err)
		inv.queueDel(queueReason(err))
		return releaseResult{outcome: queued}, nil
	}
}

// logReleased logs ipamd's release, and that no policy agent is told.
func (inv *invocation) logReleased(reply *rpc.DelNetworkReply) {
	inv.log.Info("ipamd released", "allocations", reply.IPAllocationMetadata)
	if reply.NetworkPolicyMode != "" {
		inv.log.Warn("network policy enforcement is not supported by this plugin; no policy agent is told about the deletion",
			"networkPolicyMode", reply.NetworkPolicyMode)
	}
}

// replyAddresses are the pod addresses of ipamd's reply that parse.
func replyAddresses(reply *rpc.DelNetworkReply) []net.IP {
	var ips []net.IP
	for _, md := range reply.IPAllocationMetadata {
		if ip := replyAddress(md); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips
}

// queueReason is the queued DEL's reason for a DelNetwork that failed.
func queueReason(err error) string {
	if isUnreachable(err) {
		return "ipamd unreachable: " + err.Error()
	}
	return "ipamd error: " + err.Error()
}

// removeReleased removes the node routing of the addresses ipamd released
// (one per pod interface); a failure fails the DEL, so the runtime
// retries it.
func (inv *invocation) removeReleased(as []attachment) error {
	peers := inv.hostPeers()
	var errs []error
	for _, a := range as {
		if err := inv.releaseHostRouting(a.IP, peers.of(a.IfName)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(as) == 0 {
		inv.log.Warn("ipamd's reply carries no address; nothing to remove on the node")
	}
	return errors.Join(errs...)
}

// removeFromPrev removes the node routing of the addresses prevResult
// names, when ipamd's reply named none; failures are only logged (the
// release is ipamd's, or queued for it). After a repeated DEL (repeat) a
// pod veth still there means the namespace outlives DELs: the runtime
// keeps it (or retries after a later plugin failed), so the pair would
// not go with it and is deleted here.
func (inv *invocation) removeFromPrev(prev *prevInfo, repeat bool) {
	peers := inv.hostPeers()
	ifNames := []string{inv.args.IfName}
	if prev == nil {
		inv.log.Info("no usable prevResult; no address to remove from the node")
	} else {
		ifNames = nil
		for _, a := range prev.Attachments {
			if err := inv.releaseHostRouting(a.IP, peers.of(a.IfName)); err != nil {
				inv.log.Warn("could not remove the node's route and rules from prevResult", "ip", a.IP.String(), "error", err)
			}
			ifNames = append(ifNames, a.IfName)
		}
	}
	if !repeat {
		return
	}
	for _, name := range ifNames {
		if peers.of(name) > 0 {
			inv.log.Info("namespace outlived an earlier DEL; deleting the pod's veth", "ifName", name)
			inv.removeContainerLink(name)
		}
	}
}

// callDelNetwork asks ipamd to release the pod's address.
func (inv *invocation) callDelNetwork() (*rpc.DelNetworkReply, error) {
	return newIPAMDClient(inv.conf.IPAMDSocket).delNetwork(inv.delRequest(reasonPodDeleted))
}

// prevInfo parses prevResult, logging (not failing) when it is unusable.
func (inv *invocation) prevInfo() *prevInfo {
	conf := inv.conf
	if conf.prevErr != nil {
		inv.log.Warn("prevResult could not be parsed; ignoring it", "error", conf.prevErr)
		return nil
	}
	if conf.prevResult == nil {
		return nil
	}
	dummy := ""
	if inv.pod.Name != "" || inv.pod.Namespace != "" {
		dummy = dummyIfName(inv.pod.Namespace, inv.pod.Name)
	}
	info, err := parsePrevInfo(conf.prevResult, dummy, inv.args.IfName)
	if errors.Is(err, errNoDummy) && dummy != "" {
		// CNI_ARGS naming a different pod than the result: take any
		// dummy entry.
		info, err = parsePrevInfo(conf.prevResult, "", inv.args.IfName)
	}
	if err != nil {
		inv.log.Warn("prevResult does not describe an aws-cni attachment; ignoring it", "error", err)
		return nil
	}
	return &info
}

// peerCache finds the node ifindex of each pod interface's veth once.
type peerCache struct {
	inv   *invocation
	found map[string]int
}

func (inv *invocation) hostPeers() *peerCache {
	return &peerCache{inv: inv, found: map[string]int{}}
}

// of is the node ifindex of the veth of pod interface ifName ("" means
// CNI_IFNAME), 0 when the namespace or the pair is gone (or cannot be
// read: then only an address no interface routes has its rules removed).
func (c *peerCache) of(ifName string) int {
	if ifName == "" {
		ifName = c.inv.args.IfName
	}
	if p, ok := c.found[ifName]; ok {
		return p
	}
	peer, err := driver.HostPeer(c.inv.args.Netns, ifName, c.inv.log)
	if err != nil {
		c.inv.log.Warn("could not find the pod's veth; its node route goes with the namespace", "ifName", ifName, "error", err)
		peer = 0
	}
	c.found[ifName] = peer
	return peer
}

// removeContainerLink deletes the pod's veth ifName when its namespace
// remains.
func (inv *invocation) removeContainerLink(ifName string) {
	if err := driver.RemoveContainerLink(inv.args.Netns, ifName, inv.log); err != nil {
		inv.log.Warn("could not delete the pod's interface; it goes with the namespace", "ifName", ifName, "error", err)
	}
}

// releaseHostRouting removes the route of ip through peer (this pod's
// veth) and the rules of ip; an address routed to another live interface
// is not an error.
func (inv *invocation) releaseHostRouting(ip net.IP, peer int) error {
	err := driver.ReleaseHostRouting(ip, peer, inv.addressLocks(), inv.log, inv.releaseOpts...)
	if errors.Is(err, driver.ErrAddressInUse) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove node rules for %s: %w", ip, err)
	}
	inv.log.Info("node rules removed", "ip", ip.String())
	return nil
}

// teardownBranch cleans a branch-ENI pod (only with a namespace: the
// runtime's second DEL has none and finds nothing left to do).
func (inv *invocation) teardownBranch(vlan int, ips []net.IP) error {
	if inv.args.Netns == "" {
		inv.log.Info("branch-ENI pod DEL without a namespace; nothing to do", "vlan", vlan)
		return nil
	}
	var ip net.IP
	if len(ips) > 0 {
		ip = ips[0]
	}
	if err := driver.TeardownBranchENI(vlan, ip, inv.hostPeers().of(inv.args.IfName), inv.addressLocks(), inv.log); err != nil {
		return fmt.Errorf("tear down branch-ENI pod (vlan %d): %w", vlan, err)
	}
	return nil
}

// queueDel records the release durably for ipamd to replay. Failing to
// queue is logged, not returned: ipamd's reconciler still finds the leak.
func (inv *invocation) queueDel(reason string) {
	e := delqueue.Entry{
		ContainerID:  inv.args.ContainerID,
		IfName:       inv.args.IfName,
		NetworkName:  inv.conf.Name,
		PodNamespace: inv.pod.Namespace,
		PodName:      inv.pod.Name,
		PodUID:       inv.pod.UID,
		Reason:       reason,
	}
	if err := delqueue.Write(inv.conf.DelQueueDir, e); err != nil {
		inv.log.Error("could not queue the DEL for ipamd; the address stays allocated until ipamd's reconciler reclaims it",
			"dir", inv.conf.DelQueueDir, "error", err)
		return
	}
	inv.log.Info("DEL queued for ipamd", "dir", inv.conf.DelQueueDir)
}
