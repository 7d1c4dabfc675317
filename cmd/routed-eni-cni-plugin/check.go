package main

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
)

// cmdCheck verifies the attachment prevResult describes is still in place.
// (The conflist keeps disableCheck: true, as upstream's does, so runtimes
// only call it when told to.)
func cmdCheck(args *skel.CmdArgs) error {
	inv, done, err := start("CHECK", args, true)
	if err != nil {
		return err
	}
	defer done()
	if err := inv.check(); err != nil {
		inv.log.Error("CHECK failed", "error", err)
		return err
	}
	inv.log.Info("CHECK passed")
	return nil
}

func (inv *invocation) check() error {
	conf := inv.conf
	if conf.prevErr != nil {
		return types.NewError(types.ErrDecodingFailure, "cannot parse prevResult", conf.prevErr.Error())
	}
	if conf.prevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "CHECK needs prevResult", "")
	}
	info, err := parsePrevInfo(conf.prevResult, dummyIfName(inv.pod.Namespace, inv.pod.Name), inv.args.IfName)
	if err != nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "prevResult does not describe an aws-cni attachment", err.Error())
	}
	if info.VlanID != 0 {
		return fmt.Errorf("CHECK of branch-ENI pods (vlan %d) is not supported", info.VlanID)
	}
	for _, a := range info.Attachments {
		ifName := a.IfName
		if ifName == "" {
			ifName = inv.args.IfName
		}
		err := driver.Check(driver.PodNetwork{
			HostVeth:    hostVethNameAt(conf.VethPrefix, inv.pod.Namespace, inv.pod.Name, a.Index),
			ContainerIf: ifName,
			Index:       a.Index,
			NetnsPath:   inv.args.Netns,
			IP:          a.IP,
			RouteTable:  a.RouteTable,
			MTU:         conf.podMTU,
		})
		if err != nil {
			return fmt.Errorf("CHECK %s: %w", a.IP, err)
		}
	}
	return nil
}
