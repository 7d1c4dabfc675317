package logger

import (
	"io"
	"log/slog"
	"strings"
)

// OpenPlugin is a CNI plugin's logger as its netconf asks for it
// (pluginLogFile, pluginLogLevel), and a function that closes the file.
// Stdout carries the CNI result, so a "stdout" destination is sent to
// stderr instead. An unknown level logs at Debug and says so.
func OpenPlugin(file, level string) (*slog.Logger, io.Closer) {
	if strings.EqualFold(file, "stdout") {
		file = "stderr"
	}
	lvl, lerr := ParseLevel(level)
	w := Open(file)
	log := New(w, lvl)
	if lerr != nil {
		log.Warn("unknown pluginLogLevel; logging at Debug", "error", lerr)
	}
	return log, w
}
