// Package logger builds the structured JSON logger ipamd and the tools use:
// level and destination as upstream configures them (AWS_VPC_K8S_CNI_LOGLEVEL,
// AWS_VPC_K8S_CNI_LOG_FILE), files rotated like upstream's. Like every
// pkg/utils package, it never imports a package of this module outside
// pkg/utils.
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

// Open returns the writer for a destination: "stdout", "stderr", or a file
// path rotated at 100 MB with 5 compressed backups kept 30 days.
func Open(dest string) io.WriteCloser {
	switch strings.ToLower(dest) {
	case "stdout", "":
		return nopCloser{os.Stdout}
	case "stderr":
		return nopCloser{os.Stderr}
	}
	return &lumberjack.Logger{Filename: dest, MaxSize: 100, MaxBackups: 5, MaxAge: 30, Compress: true}
}

// New returns a JSON logger writing to w at level.
func New(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
