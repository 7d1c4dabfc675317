package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/ns"
)

// cmdAdd gives the pod its egress interface, or passes the previous result
// through when the plugin is disabled.
func cmdAdd(args *skel.CmdArgs) error {
	conf, prevErr, err := loadNetConf(args.StdinData)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "failed to parse config", err.Error())
	}
	log, done := openLog(conf, "ADD")
	defer done()
	prev, err := conf.prevResult(prevErr)
	if err != nil {
		log.Error("ADD needs the previous plugin's result", "error", err)
		return types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	if !conf.enabled() {
		log.Debug("egress disabled; passing the previous result through", "enabled", conf.Enabled, "containerID", args.ContainerID)
		return types.PrintResult(prev, conf.CNIVersion)
	}
	res, err := add(args, conf, prev, log)
	if err != nil {
		log.Error("ADD failed", "containerID", args.ContainerID, "netns", args.Netns, "error", err)
		return err
	}
	return types.PrintResult(res, conf.CNIVersion)
}

// add does the enabled ADD and returns the result to print.
func add(args *skel.CmdArgs, conf *NetConf, prev *current.Result, log *slog.Logger) (_ *current.Result, err error) {
	if err := conf.checkNodeIP(); err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	mtu, err := conf.podMTU()
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	if conf.IPAM.Type == "" {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "no ipam plugin configured", "")
	}
	f := conf.family()
	chain := chainName(f, conf.Name, args.ContainerID)
	comment := ruleComment(conf.Name, args.ContainerID)

	netns, err := ns.GetNS(args.Netns)
	if err != nil {
		return nil, fmt.Errorf("open netns %q: %w", args.Netns, err)
	}
	defer netns.Close()

	ipamRes, err := ipam.ExecAdd(conf.IPAM.Type, args.StdinData)
	if err != nil {
		return nil, fmt.Errorf("running IPAM plugin failed: %w", err)
	}
	// From here on a failure gives the address back.
	defer func() {
		if err != nil {
			if derr := ipam.ExecDel(conf.IPAM.Type, args.StdinData); derr != nil {
				log.Warn("releasing the egress address after a failed ADD", "error", derr)
			}
		}
	}()
	ipRes, err := current.NewResultFromResult(ipamRes)
	if err != nil {
		return nil, fmt.Errorf("IPAM result: %w", err)
	}
	if len(ipRes.IPs) != 1 {
		return nil, fmt.Errorf("IPAM plugin returned %d addresses, want exactly one", len(ipRes.IPs))
	}
	ipc := ipRes.IPs[0]
	if (ipc.Address.IP.To4() == nil) != f.v6 {
		return nil, fmt.Errorf("IPAM address %s is not of the egress family of nodeIP %s", ipc.Address.String(), conf.NodeIP)
	}
	if err := ip.EnableForward(ipRes.IPs); err != nil {
		return nil, fmt.Errorf("enable forwarding: %w", err)
	}

	var hostIf, contIf net.Interface
	if f.v6 {
		hostIf, contIf, err = setupV6(netns, args.IfName, ipc, ipRes.Routes, mtu)
	} else {
		hostIf, contIf, err = setupV4(netns, ipc, ipRes.Routes, mtu)
	}
	if err != nil {
		removeEgressLink(netns, f.ifName, log)
		return nil, err
	}
	ipt, err := iptablesFor(f)
	if err == nil {
		err = addSNAT(ipt, f, conf.NodeIP, ipc.Address.IP, chain, comment, conf.RandomizeSNAT)
		if err != nil {
			if derr := delSNAT(ipt, chain); derr != nil {
				log.Warn("removing a half-built SNAT chain", "chain", chain, "error", derr)
			}
		}
	}
	if err != nil {
		removeEgressLink(netns, f.ifName, log)
		return nil, err
	}
	log.Info("egress interface ready", "containerID", args.ContainerID, "interface", f.ifName,
		"address", ipc.Address.String(), "hostVeth", hostIf.Name, "chain", chain, "nodeIP", conf.NodeIP.String())

	// Upstream's result: the previous one plus the two ends of the
	// egress veth (the egress address is not added to the IP list).
	prev.Interfaces = append(prev.Interfaces,
		&current.Interface{Name: hostIf.Name, Mac: hostIf.HardwareAddr.String()},
		&current.Interface{Name: contIf.Name, Mac: contIf.HardwareAddr.String(), Sandbox: args.Netns})
	return prev, nil
}

// removeEgressLink deletes the pod's egress interface after a failed ADD
// (its host end and routes go with it).
func removeEgressLink(netns ns.NetNS, ifName string, log *slog.Logger) {
	err := netns.Do(func(ns.NetNS) error { return ip.DelLinkByName(ifName) })
	if err != nil && !errors.Is(err, ip.ErrLinkNotFound) {
		log.Warn("removing the egress interface after a failed ADD", "interface", ifName, "error", err)
	}
}
