package main

import (
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// errPluginNotAvailable is CNI 1.1's STATUS code for "cannot add pods now".
const errPluginNotAvailable uint = 50

// cmdStatus (CNI 1.1) reports whether an ADD could succeed: when enabled,
// the IPAM plugin (host-local, installed by the init container) must be
// on CNI_PATH. Upstream has no STATUS; a 0.4.0 conflist never calls it.
func cmdStatus(args *skel.CmdArgs) error {
	conf, _, err := loadNetConf(args.StdinData)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "failed to parse config", err.Error())
	}
	if !conf.enabled() {
		return nil
	}
	log, done := openLog(conf, "STATUS")
	defer done()
	if conf.IPAM.Type == "" {
		return types.NewError(errPluginNotAvailable, "no ipam plugin configured", "")
	}
	paths := filepath.SplitList(os.Getenv("CNI_PATH"))
	if _, err := invoke.FindInPath(conf.IPAM.Type, paths); err != nil {
		log.Warn("STATUS: the IPAM plugin is missing", "ipam", conf.IPAM.Type, "error", err)
		return types.NewError(errPluginNotAvailable, "IPAM plugin "+conf.IPAM.Type+" not found", err.Error())
	}
	return nil
}
