package main

import (
	"log/slog"
	"strings"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
)

// openLog returns the plugin's logger (JSON, the project's line shape) as
// the netconf asks for it, and a function that closes the file. Stdout
// carries the CNI result, so "stdout" is sent to stderr instead.
func openLog(conf *NetConf, cmd string) (*slog.Logger, func()) {
	dest := conf.PluginLogFile
	if strings.EqualFold(dest, "stdout") {
		dest = "stderr"
	}
	level, lerr := logger.ParseLevel(conf.PluginLogLevel)
	w := logger.Open(dest)
	log := logger.New(w, level).With("plugin", "egress-cni", "cmd", cmd)
	if lerr != nil {
		log.Warn("unknown pluginLogLevel; logging at Debug", "error", lerr)
	}
	return log, func() { _ = w.Close() }
}
