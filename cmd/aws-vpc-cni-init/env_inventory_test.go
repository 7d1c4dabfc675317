package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/test/envinventory"
)

// initRun runs the init container on a fresh fake node with env and
// returns what it did, in comparable form: the sysctls and the files in
// the node's default bin dir. The variables it looked up are added to
// read.
func initRun(t *testing.T, env map[string]string, read map[string]bool) string {
	n := newFakeNode(t)
	if _, ok := env["HOST_CNI_BIN_PATH"]; !ok {
		env["HOST_CNI_BIN_PATH"] = n.bin
	}
	lookup := func(k string) (string, bool) { read[k] = true; v, ok := env[k]; return v, ok }
	o := options{WorkDir: n.init, ProcSys: n.procSys, Self: selfName}
	require.NoError(t, run(context.Background(), o, lookup, fakeDeps(), slog.New(slog.DiscardHandler)))
	var files []string
	entries, _ := os.ReadDir(n.bin)
	for _, e := range entries {
		files = append(files, e.Name())
	}
	sort.Strings(files)
	return fmt.Sprint(n.sysctls(t), files)
}

// The init container looks up every variable envinventory says it reads,
// a changed value changes what it does, and it reads nothing the list
// does not know (test/envinventory checks ipamd and docs/upgrade.md).
func TestInitReadsWhatTheInventorySays(t *testing.T) {
	read := map[string]bool{}
	def := initRun(t, map[string]string{}, read)
	for _, v := range envinventory.All {
		if !v.Reads(envinventory.Init) {
			continue
		}
		assert.True(t, read[v.Name], "init never looks up %s", v.Name)
		if (v.Status == envinventory.Honoured || v.Status == envinventory.New) && v.Sample != "" {
			sample := v.Sample
			if v.Name == "HOST_CNI_BIN_PATH" {
				sample = t.TempDir() // the list's sample is a host path
			}
			got := initRun(t, map[string]string{v.Name: sample}, read)
			assert.NotEqual(t, def, got, "%s=%s changes nothing init does", v.Name, sample)
		}
	}
	for name := range read {
		if v, ok := envinventory.Lookup(name); !ok || !v.Reads(envinventory.Init) {
			t.Errorf("init reads %s, which test/envinventory does not say it reads: add it (and to docs/upgrade.md)", name)
		}
	}
}
