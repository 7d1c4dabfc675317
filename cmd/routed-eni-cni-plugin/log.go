package main

import (
	"log/slog"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
)

// openLog returns the plugin's logger as the netconf asks for it
// (logger.OpenPlugin) and a function that closes the file.
func openLog(conf *NetConf, cmd string) (*slog.Logger, func()) {
	log, c := logger.OpenPlugin(conf.PluginLogFile, conf.PluginLogLevel)
	return log.With("cmd", cmd), func() { _ = c.Close() }
}
