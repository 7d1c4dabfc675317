// Package logger builds the structured logger of ipamd, the aws-cni plugin,
// the entrypoint and the tools: log/slog with a handler that writes
// upstream's JSON line shape (zap's: "level", "ts", "caller", "msg", then
// the fields), levels named as upstream names them (AWS_VPC_K8S_CNI_LOGLEVEL,
// pluginLogLevel), and destinations as upstream opens them
// (AWS_VPC_K8S_CNI_LOG_FILE, pluginLogFile): stdout, stderr or a file
// rotated like upstream's. Like every pkg/utils package, it never imports a
// package of this module outside pkg/utils.
package logger

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"gopkg.in/natefinch/lumberjack.v2"
)

// ParseLevel maps upstream's level names (Debug, Info, Warn, Error, any case)
// to a slog level.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug", "":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error", "fatal":
		return slog.LevelError, nil
	}
	return slog.LevelDebug, fmt.Errorf("unknown log level %q", s)
}

// Upstream's rotation of a log file (lumberjack, as upstream uses).
const (
	RotateMaxSizeMB  = 100 // rotate when the file reaches this size
	RotateMaxBackups = 5   // rotated files kept
	RotateMaxAgeDays = 30  // rotated files older than this are removed
)

// Open returns the writer for a destination: "stdout", "stderr" (any case),
// or a file path, created with its directory and rotated as upstream's:
// at 100 MB, keeping 5 gzip-compressed backups for at most 30 days.
func Open(dest string) io.WriteCloser {
	switch strings.ToLower(dest) {
	case "stdout", "":
		return nopCloser{os.Stdout}
	case "stderr":
		return nopCloser{os.Stderr}
	}
	return &lumberjack.Logger{Filename: dest, MaxSize: RotateMaxSizeMB, MaxBackups: RotateMaxBackups,
		MaxAge: RotateMaxAgeDays, Compress: true}
}

// New returns a logger writing upstream's JSON lines to w at level.
func New(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(NewHandler(w, level))
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
