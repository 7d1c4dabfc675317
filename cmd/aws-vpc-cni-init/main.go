// Command aws-vpc-cni-init is the aws-node pod's init container. From its
// working directory (/init in the image) it copies every regular file but
// itself (the core CNI plugins, their LICENSE, the support script) into
// HOST_CNI_BIN_PATH (default /host/opt/cni/bin), finds the primary
// interface (the host link whose MAC is IMDS "mac"), and sets through
// /proc/sys:
//
//	net/ipv4/conf/<primary>/rp_filter = 2
//	net/ipv4/tcp_early_demux = 0 if DISABLE_TCP_EARLY_DEMUX=true, else 1 (when present)
//	net/ipv6/conf/all/disable_ipv6 = 0                  if ENABLE_IPv6=true
//	net/ipv6/conf/all/forwarding = 1,
//	net/ipv6/conf/<primary>/accept_ra = 2               if ENABLE_IPv6 or ENABLE_V6_EGRESS
//
// Any failure exits 1. Flags (tests and development only): -workdir DIR
// (default "."), -proc-sys DIR (default /proc/sys). It never imports
// pkg/ipamd/... or the simulators.
package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
)

func main() {
	o := options{Self: filepath.Base(os.Args[0])}
	fs := flag.NewFlagSet(selfName, flag.ContinueOnError)
	fs.StringVar(&o.WorkDir, "workdir", ".", "directory whose files are installed (tests)")
	fs.StringVar(&o.ProcSys, "proc-sys", defaultProcSys, "sysctl tree (tests)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(1)
	}
	log := logger.New(os.Stderr, slog.LevelInfo).With("component", selfName)
	d := deps{PrimaryMAC: imdsPrimaryMAC, Interfaces: net.Interfaces}
	if err := run(context.Background(), o, os.LookupEnv, d, log); err != nil {
		log.Error("init failed", "error", err)
		os.Exit(1)
	}
	log.Info("init done")
}
