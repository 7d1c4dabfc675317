package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	current "github.com/containernetworking/cni/pkg/types/100"
)

// Route tables as upstream numbers them.
const (
	mainTable = 254
	// legacyPrimaryTable is what very old results carry for the primary ENI.
	legacyPrimaryTable = 1
)

// tableForDevice is the route table of an ENI: main for the primary ENI
// (device 0), device+1 otherwise.
func tableForDevice(device int) int {
	if device <= 0 {
		return mainTable
	}
	return device + 1
}

// normalizeTable maps the values meaning "main" to main.
func normalizeTable(t int) int {
	if t <= legacyPrimaryTable {
		return mainTable
	}
	return t
}

// attachment is what the plugin set up for one pod address.
type attachment struct {
	IP           net.IP // IPv4, or IPv6 in IPv6 mode
	RouteTable   int    // normalised; main for the primary ENI
	DeviceNumber int
	IfName       string // the pod-side interface holding IP
	Index        int    // that interface's position (0: CNI_IFNAME)
}

// buildResult is the ADD result in upstream's shape, which DEL (this
// plugin's and upstream's) reads back from prevResult. Per pod interface i
// (one, or one per network card):
//
//	interfaces[2i]   = {name: <host veth i>}
//	interfaces[2i+1] = {name: <container if i>, sandbox: <netns>, mac: "<route table of i>"}
//	ips[i]           = {interface: 2i+1, address: <pod IP i>/32 (or /128)}
//
// and last the pseudo entry {name: "dummy<hash>", mac: "0", sandbox:
// "<device number of interface 0>"}. Storing the route table in mac and
// the device number in sandbox is deliberate (upstream's contract), not a
// bug.
func buildResult(ifs []podInterface, netns, dummy string) *current.Result {
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	for _, pi := range ifs {
		res.Interfaces = append(res.Interfaces,
			&current.Interface{Name: pi.HostVeth},
			&current.Interface{Name: pi.ContainerIf, Sandbox: netns, Mac: strconv.Itoa(pi.RawTable)})
		res.IPs = append(res.IPs, &current.IPConfig{
			Interface: current.Int(len(res.Interfaces) - 1),
			Address:   hostNet(pi.IP),
		})
	}
	device := 0
	if len(ifs) > 0 {
		device = ifs[0].DeviceNumber
	}
	res.Interfaces = append(res.Interfaces, &current.Interface{Name: dummy, Mac: "0", Sandbox: strconv.Itoa(device)})
	return res
}

// buildBranchResult is the ADD result of a branch-ENI pod in upstream's
// shape:
//
//	interfaces[0] = {name: <host veth>}
//	interfaces[1] = {name: CNI_IFNAME, sandbox: <netns>, mac: "<route table>"}
//	interfaces[2] = {name: "dummy<hash>", mac: "<VLAN id>"}
//	ips[0]        = {interface: 1, address: <pod IP>/32 (or /128), gateway: <subnet gateway>}
//
// The VLAN in the dummy entry's mac is what lets a DEL tear the pod down
// from prevResult alone, without ipamd (branch addresses are not ipamd's).
func buildBranchResult(hostVeth, contIf, netns, dummy string, b branchAttachment) *current.Result {
	return &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: hostVeth},
			{Name: contIf, Sandbox: netns, Mac: strconv.Itoa(b.RawTable)},
			{Name: dummy, Mac: strconv.Itoa(b.VlanID)},
		},
		IPs: []*current.IPConfig{{
			Interface: current.Int(1),
			Address:   hostNet(b.IP),
			Gateway:   b.SubnetGW,
		}},
	}
}

// prevInfo is what a previous ADD result says about the pod.
type prevInfo struct {
	// VlanID is set for branch-ENI (security-groups-for-pods) pods: their
	// dummy entry carries the VLAN in mac.
	VlanID      int
	Attachments []attachment
}

// ips are the pod's addresses.
func (p *prevInfo) ips() []net.IP {
	ips := make([]net.IP, len(p.Attachments))
	for i, a := range p.Attachments {
		ips[i] = a.IP
	}
	return ips
}

var errNoDummy = errors.New("prevResult has no dummy interface entry")

// parsePrevInfo reads the attachment(s) out of a previous result. dummyName
// is the expected pseudo-interface name (empty: any "dummy…" entry) and
// ifName is CNI_IFNAME.
//
// Regular pods: dummy mac "0", sandbox = device number. The route table of
// each container interface is the integer in its mac when present (results
// of upstream v1.20 and later, and ours), else the device's table.
func parsePrevInfo(res *current.Result, dummyName, ifName string) (prevInfo, error) {
	if res == nil {
		return prevInfo{}, errors.New("no prevResult")
	}
	dummyIdx := -1
	for i, itf := range res.Interfaces {
		if itf == nil {
			continue
		}
		if (dummyName != "" && itf.Name == dummyName) || (dummyName == "" && strings.HasPrefix(itf.Name, dummyPrefix)) {
			dummyIdx = i
		}
	}
	if dummyIdx < 0 {
		return prevInfo{}, errNoDummy
	}
	dummy := res.Interfaces[dummyIdx]
	vlan, err := strconv.Atoi(strings.TrimSpace(dummy.Mac))
	if err != nil {
		return prevInfo{}, fmt.Errorf("prevResult dummy entry %q: mac %q is not an integer", dummy.Name, dummy.Mac)
	}
	var info prevInfo
	if vlan != 0 {
		info.VlanID = vlan
	}
	device := 0
	if vlan == 0 && dummy.Sandbox != "" {
		d, err := strconv.Atoi(strings.TrimSpace(dummy.Sandbox))
		if err != nil || d < 0 {
			return prevInfo{}, fmt.Errorf("prevResult dummy entry %q: sandbox %q is not a device number", dummy.Name, dummy.Sandbox)
		}
		device = d
	}

	// Every address bound to a container interface (sandbox set): for a
	// regular pod CNI_IFNAME, and mNicIf<k> for k below the interface
	// count, (entries - 1) / 2, of a multi-NIC pod.
	count := (len(res.Interfaces) - 1) / 2
	for _, ipc := range res.IPs {
		if ipc == nil || canonicalIP(ipc.Address.IP) == nil {
			continue
		}
		ip := canonicalIP(ipc.Address.IP)
		idx := -1
		if ipc.Interface != nil {
			idx = *ipc.Interface
		}
		if idx < 0 || idx >= len(res.Interfaces) || idx == dummyIdx || res.Interfaces[idx] == nil {
			// No usable interface index: take the address for CNI_IFNAME
			// with the device's table.
			info.Attachments = append(info.Attachments, attachment{IP: ip, RouteTable: tableForDevice(device), DeviceNumber: device, IfName: ifName})
			continue
		}
		itf := res.Interfaces[idx]
		if itf.Sandbox == "" {
			continue // a host-side entry
		}
		index := 0
		if info.VlanID == 0 && ifName != "" {
			k, ok := containerIfIndex(itf.Name, ifName)
			if !ok || (k > 0 && k >= count) {
				continue
			}
			index = k
		}
		table := tableForDevice(device)
		if t, err := strconv.Atoi(strings.TrimSpace(itf.Mac)); err == nil {
			table = normalizeTable(t)
		}
		// Otherwise (no mac, or a real MAC in results older than upstream
		// v1.20) the device's table.
		if info.VlanID != 0 {
			table = info.VlanID + 100
		}
		info.Attachments = append(info.Attachments, attachment{IP: ip, RouteTable: table, DeviceNumber: device, IfName: itf.Name, Index: index})
	}
	if len(info.Attachments) == 0 {
		return info, errors.New("prevResult has no address for the pod")
	}
	return info, nil
}
