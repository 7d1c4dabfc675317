package logger

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/natefinch/lumberjack.v2"
)

func TestParseLevelTakesUpstreamsNames(t *testing.T) {
	tests := []struct {
		in      string
		want    slog.Level
		wantErr bool
	}{
		{"Debug", slog.LevelDebug, false},
		{"DEBUG", slog.LevelDebug, false},
		{"", slog.LevelDebug, false},
		{"info", slog.LevelInfo, false},
		{" Info ", slog.LevelInfo, false},
		{"WARN", slog.LevelWarn, false},
		{"warning", slog.LevelWarn, false},
		{"Error", slog.LevelError, false},
		{"fatal", slog.LevelError, false},
		{"verbose", slog.LevelDebug, true},
	}
	for _, tt := range tests {
		got, err := ParseLevel(tt.in)
		assert.Equal(t, tt.want, got, tt.in)
		assert.Equal(t, tt.wantErr, err != nil, tt.in)
	}
}

func TestOpenStandardStreams(t *testing.T) {
	for dest, want := range map[string]*os.File{"stdout": os.Stdout, "STDOUT": os.Stdout, "": os.Stdout, "stderr": os.Stderr, "Stderr": os.Stderr} {
		w := Open(dest)
		assert.Equal(t, want, w.(nopCloser).Writer, dest)
		require.NoError(t, w.Close(), "closing must not close the process's stream")
	}
}

// A file destination is created with its directory and rotated as
// upstream rotates ipamd.log and plugin.log.
func TestOpenFileIsRotatedAsUpstreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "var/log/aws-routed-eni/ipamd.log")
	w := Open(path)
	lj, ok := w.(*lumberjack.Logger)
	require.True(t, ok, "%T", w)
	assert.Equal(t, path, lj.Filename)
	assert.Equal(t, []int{100, 5, 30}, []int{lj.MaxSize, lj.MaxBackups, lj.MaxAge}, "MB, backups, days")
	assert.True(t, lj.Compress, "backups gzip-compressed")

	New(w, slog.LevelInfo).Info("Starting L-IPAMD", "version", "v1")
	require.NoError(t, w.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 1)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &m))
	assert.Equal(t, "info", m["level"])
	assert.Equal(t, "Starting L-IPAMD", m["msg"])
	assert.Regexp(t, `^logger/logger_test.go:[0-9]+$`, m["caller"])
}
