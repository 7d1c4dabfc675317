package driver

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// HostPeer returns the node ifindex of the pod's veth peer: the other end
// of ifName in the namespace at netnsPath, provided that end lives in the
// node namespace (the plugin's own). It returns 0 when the namespace, the
// interface or the pair is gone, or the interface is not a veth into the
// node: nothing of this pod is then routed through the node.
//
// The pair is identified from inside the pod's namespace, not by the host
// veth's name: a new pod of the same namespace/name has a host veth of the
// same name, and its route must never be taken for this pod's.
func HostPeer(netnsPath, ifName string, log *slog.Logger) (int, error) {
	pod, podNs, l, err := podVeth(netnsPath, ifName, log)
	if err != nil || l == nil {
		return 0, err
	}
	defer podNs.Close()
	defer pod.Close()
	self, err := netns.Get()
	if err != nil {
		return 0, fmt.Errorf("open node network namespace: %w", err)
	}
	defer self.Close()
	// The node's id as the pod's namespace knows it; the veth's peer is in
	// the node only if its link-netnsid is that id.
	nodeID, err := pod.GetNetNsIdByFd(int(self))
	if err != nil {
		return 0, fmt.Errorf("node namespace id in %s: %w", netnsPath, err)
	}
	a := l.Attrs()
	if nodeID < 0 || a.NetNsID != nodeID || a.ParentIndex <= 0 {
		log.Info("pod interface's peer is not in the node namespace", "ifName", ifName,
			"peerIndex", a.ParentIndex, "peerNetnsID", a.NetNsID, "nodeNetnsID", nodeID)
		return 0, nil
	}
	return a.ParentIndex, nil
}

// podVeth opens the pod's namespace and finds ifName there. It returns a
// nil link (and no error) when the namespace or the link is gone, or the
// link is not a veth (left alone); otherwise the caller closes the handles.
func podVeth(netnsPath, ifName string, log *slog.Logger) (handle, netns.NsHandle, netlink.Link, error) {
	none := netns.None()
	if netnsPath == "" {
		return handle{}, none, nil, nil
	}
	if _, err := os.Stat(netnsPath); errors.Is(err, os.ErrNotExist) {
		return handle{}, none, nil, nil
	}
	pod, podNs, err := podHandle(netnsPath)
	if err != nil {
		// A path that exists but is no longer a namespace (unmounted):
		// the pod's links are gone with it.
		log.Info("pod network namespace not usable; assuming it is gone", "netns", netnsPath, "error", err)
		return handle{}, none, nil, nil
	}
	l, err := pod.LinkByName(ifName)
	if err == nil && l.Type() != "veth" {
		log.Warn("pod interface is not a veth; leaving it", "ifName", ifName, "type", l.Type())
		l, err = nil, nil
	}
	if err != nil && isNotFound(err) {
		l, err = nil, nil
	}
	if err != nil || l == nil {
		pod.Close()
		_ = podNs.Close()
		if err != nil {
			return handle{}, none, nil, fmt.Errorf("find %s in %s: %w", ifName, netnsPath, err)
		}
		return handle{}, none, nil, nil
	}
	return pod, podNs, l, nil
}
