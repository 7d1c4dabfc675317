package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logRecords reads a plugin log: every line must be one JSON object whose
// first keys are upstream's, in upstream's order.
func logRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		assert.Equal(t, []string{"level", "ts", "caller", "msg"}, firstKeys(t, sc.Bytes(), 4), sc.Text())
		out = append(out, m)
	}
	return out
}

func firstKeys(t *testing.T, line []byte, n int) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	_, err := dec.Token()
	require.NoError(t, err)
	var keys []string
	for len(keys) < n && dec.More() {
		k, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, k.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}

// Verbs run from a netconf log to its pluginLogFile (directory created)
// at its pluginLogLevel, in upstream's line shape.
func TestPluginLogsToPluginLogFileInUpstreamsShape(t *testing.T) {
	sock, _ := upstreamLikeIPAMD(t)
	tests := []struct {
		level      string
		wantLevels []string // STATUS logs one debug line here, GC one info line
	}{
		{"Debug", []string{"debug", "info"}},
		{"INFO", []string{"info"}},
		{"warn", nil},
		{"Error", nil},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "var/log/aws-routed-eni/plugin.log")
			args, _ := verbConf(t, sock, map[string]any{"pluginLogFile": logFile, "pluginLogLevel": tt.level,
				"cni.dev/valid-attachments": []map[string]string{{"containerID": "c1", "ifname": "eth0"}}})
			require.NoError(t, cmdStatus(args))
			require.NoError(t, cmdGC(args))
			if tt.wantLevels == nil {
				_, err := os.Stat(logFile)
				assert.ErrorIs(t, err, os.ErrNotExist, "nothing logged, no file")
				return
			}
			recs := logRecords(t, logFile)
			var levels []string
			for _, r := range recs {
				levels = append(levels, r["level"].(string))
				assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d{4})$`, r["ts"])
				assert.Regexp(t, `^routed-eni-cni-plugin/status_gc\.go:\d+$`, r["caller"])
			}
			assert.Equal(t, tt.wantLevels, levels)
			last := recs[len(recs)-1]
			assert.Equal(t, "GC: ipamd does not implement garbage collection; nothing collected", last["msg"])
			assert.Equal(t, "GC", last["cmd"])
			assert.Equal(t, networkName, last["network"])
		})
	}
}

// stdout carries the CNI result, so a pluginLogFile of "stdout" (which the
// entrypoint refuses to render, as upstream's does) logs to stderr instead.
func TestPluginNeverLogsToStdout(t *testing.T) {
	stdoutR, stdoutW, err := os.Pipe()
	require.NoError(t, err)
	stderrR, stderrW, err := os.Pipe()
	require.NoError(t, err)
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = stdoutW, stderrW
	log, done := openLog(&NetConf{PluginLogFile: "STDOUT", PluginLogLevel: "Debug"}, "ADD")
	log.Info("hello")
	done()
	os.Stdout, os.Stderr = oldOut, oldErr
	require.NoError(t, stdoutW.Close())
	require.NoError(t, stderrW.Close())
	var out, errOut bytes.Buffer
	_, _ = out.ReadFrom(stdoutR)
	_, _ = errOut.ReadFrom(stderrR)
	assert.Empty(t, out.String())
	var m map[string]any
	require.NoError(t, json.Unmarshal(errOut.Bytes(), &m), errOut.String())
	assert.Equal(t, "hello", m["msg"])
	assert.Equal(t, "ADD", m["cmd"])
}
