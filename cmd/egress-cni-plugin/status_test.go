package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// STATUS (CNI 1.1 conflists) fails with code 50 while the IPAM plugin is
// not on CNI_PATH, and passes once it is, or when egress is off.
func TestStatusNeedsTheIPAMPlugin(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CNI_PATH", dir)
	logFile := filepath.Join(dir, "egress.log")
	conf := func(enabled string) []byte {
		return []byte(`{"cniVersion":"1.1.0","name":"aws-cni","type":"egress-cni","enabled":"` + enabled +
			`","nodeIP":"10.0.0.1","ipam":{"type":"host-local"},"pluginLogFile":"` + logFile + `"}`)
	}
	err := cmdStatus(&skel.CmdArgs{StdinData: conf("true")})
	var cerr *types.Error
	require.True(t, errors.As(err, &cerr), "%v", err)
	assert.Equal(t, errPluginNotAvailable, cerr.Code)
	assert.Contains(t, cerr.Msg, "host-local")

	assert.NoError(t, cmdStatus(&skel.CmdArgs{StdinData: conf("false")}), "disabled: nothing needed")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "host-local"), []byte("#!/bin/true\n"), 0o755))
	assert.NoError(t, cmdStatus(&skel.CmdArgs{StdinData: conf("true")}))

	log, err := os.ReadFile(logFile)
	require.NoError(t, err)
	assert.Contains(t, string(log), `"msg":"STATUS: the IPAM plugin is missing"`)
}
