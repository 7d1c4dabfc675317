package main

import (
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	rpc "github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/ipamdwire"
)

// errPluginNotAvailable is CNI 1.1's STATUS code for "cannot add pods now".
const errPluginNotAvailable uint = 50

// cmdStatus (CNI 1.1) reports whether an ADD could succeed now: ipamd must
// answer and have a free address. An ipamd without the CNIMaintenance
// service (upstream's) is asked through the standard health service.
func cmdStatus(args *skel.CmdArgs) error {
	conf, cerr := loadNetConf(args.StdinData)
	if cerr != nil {
		return cerr
	}
	log, done := openLog(conf, "STATUS")
	defer done()
	client := newIPAMDClient(conf.IPAMDSocket)
	st, err := client.poolStatus()
	switch {
	case err == nil:
		log.Debug("pool status", "total", st.TotalIPs, "assigned", st.AssignedIPs, "available", st.AvailableIPs)
		if st.AvailableIPs <= 0 {
			log.Warn("STATUS: no IP address available", "total", st.TotalIPs, "assigned", st.AssignedIPs)
			return types.NewError(errPluginNotAvailable, "no IP address available on the node",
				fmt.Sprintf("ipamd pool: %d addresses, %d assigned", st.TotalIPs, st.AssignedIPs))
		}
		return nil
	case isUnimplemented(err):
		hs, herr := client.health()
		if herr != nil {
			log.Warn("STATUS: ipamd health check failed", "error", herr)
			return types.NewError(errPluginNotAvailable, "ipamd is not reachable", herr.Error())
		}
		if hs != rpc.HealthServing {
			log.Warn("STATUS: ipamd not serving", "status", hs.String())
			return types.NewError(errPluginNotAvailable, "ipamd is not serving", hs.String())
		}
		log.Debug("STATUS: ipamd has no pool status; its health check says SERVING")
		return nil
	case isUnreachable(err):
		log.Warn("STATUS: ipamd is not reachable", "error", err)
		return types.NewError(errPluginNotAvailable, "ipamd is not reachable", err.Error())
	default:
		log.Warn("STATUS: ipamd pool status failed", "error", err)
		return types.NewError(errPluginNotAvailable, "ipamd pool status failed", err.Error())
	}
}

// cmdGC (CNI 1.1) tells ipamd which attachments of this network the
// runtime still has, so it may release the addresses of the others.
func cmdGC(args *skel.CmdArgs) error {
	conf, cerr := loadNetConf(args.StdinData)
	if cerr != nil {
		return cerr
	}
	log, done := openLog(conf, "GC")
	defer done()
	began := time.Now()
	req := &rpc.GarbageCollectRequest{NetworkName: conf.Name}
	for _, a := range conf.ValidAttachments {
		req.ValidAttachments = append(req.ValidAttachments, &rpc.Attachment{ContainerID: a.ContainerID, IfName: a.IfName})
	}
	reply, err := newIPAMDClient(conf.IPAMDSocket).garbageCollect(req)
	switch {
	case err == nil:
		log.Info("GC done", "network", conf.Name, "validAttachments", len(req.ValidAttachments),
			"released", reply.Released, "deferred", reply.Deferred, "took", time.Since(began).String())
		return nil
	case isUnimplemented(err):
		log.Info("GC: ipamd does not implement garbage collection; nothing collected", "network", conf.Name)
		return nil
	case isUnreachable(err):
		log.Warn("GC: ipamd is not reachable", "error", err)
		return types.NewError(types.ErrTryAgainLater, "ipamd is not reachable", err.Error())
	default:
		log.Error("GC failed", "error", err)
		return fmt.Errorf("GarbageCollect: %w", err)
	}
}
