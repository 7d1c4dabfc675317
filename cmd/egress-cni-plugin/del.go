package main

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/ns"
)

// cmdDel releases the egress address, removes the pod's egress interface
// (its host end, gateway address and host route go with it) and the SNAT
// chain with its POSTROUTING jump. Each step tolerates what is already
// gone, so a repeated DEL succeeds.
func cmdDel(args *skel.CmdArgs) error {
	conf, prevErr, err := loadNetConf(args.StdinData)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "failed to parse config", err.Error())
	}
	log, done := openLog(conf, "DEL")
	defer done()
	if !conf.enabled() {
		log.Debug("egress disabled; nothing to delete", "containerID", args.ContainerID)
		return nil
	}
	if prevErr != nil {
		// DEL does not need it.
		log.Warn("ignoring an unparsable prevResult", "error", prevErr)
	}
	if err := ipam.ExecDel(conf.IPAM.Type, args.StdinData); err != nil {
		log.Error("releasing the egress address failed", "containerID", args.ContainerID, "error", err)
		return fmt.Errorf("running IPAM plugin failed: %w", err)
	}
	f := conf.family()
	chain := chainName(f, conf.Name, args.ContainerID)

	var errs []error
	if args.Netns != "" {
		err := ns.WithNetNSPath(args.Netns, func(ns.NetNS) error {
			_, err := ip.DelLinkByNameAddr(f.ifName)
			if errors.Is(err, ip.ErrLinkNotFound) {
				return nil
			}
			return err
		})
		var gone ns.NSPathNotExistErr
		if err != nil && !errors.As(err, &gone) {
			errs = append(errs, fmt.Errorf("remove %s: %w", f.ifName, err))
		}
	}
	ipt, err := iptablesFor(f)
	if err == nil {
		err = delSNAT(ipt, chain)
	}
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		log.Error("DEL failed", "containerID", args.ContainerID, "error", err)
		return err
	}
	log.Info("egress removed", "containerID", args.ContainerID, "interface", f.ifName, "chain", chain)
	return nil
}
