package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
	"github.com/aws/amazon-vpc-cni-k8s/test/envinventory"
)

// validationOnly are variables the entrypoint reads only to refuse bad
// values (ipamd is what uses them): a valid value changes nothing here.
var validationOnly = map[string]bool{
	"ENABLE_POD_ENI":     true, // it checks POD_SECURITY_GROUP_ENFORCING_MODE
	"IP_COOLDOWN_PERIOD": true,
	"MINIMUM_IP_TARGET":  true,
	"WARM_IP_TARGET":     true,
	"WARM_PREFIX_TARGET": true,
}

// entrypointLoad is everything the entrypoint takes from env, in
// comparable form, and the variables it looked up (added to read).
func entrypointLoad(env map[string]string, read map[string]bool) string {
	lookup := func(k string) (string, bool) { read[k] = true; v, ok := env[k]; return v, ok }
	s, err := loadSettings(envutil.Env{Lookup: lookup, Warn: func(string, string, string) {}})
	log := newLogger(lookup, io.Discard)
	return fmt.Sprintf("%+v err=%v debug=%v", s, err, log.Enabled(context.Background(), slog.LevelDebug))
}

// The entrypoint looks up every variable envinventory says it reads, a
// changed value changes what it loads, and it reads nothing the list does
// not know (test/envinventory checks ipamd and docs/upgrade.md).
func TestEntrypointReadsWhatTheInventorySays(t *testing.T) {
	read := map[string]bool{}
	def := entrypointLoad(map[string]string{}, read)
	for _, v := range envinventory.All {
		if !v.Reads(envinventory.Entrypoint) {
			continue
		}
		if (v.Status == envinventory.Honoured || v.Status == envinventory.New) && v.Sample != "" {
			got := entrypointLoad(map[string]string{v.Name: v.Sample}, read)
			if !validationOnly[v.Name] {
				assert.NotEqual(t, def, got, "%s=%s changes nothing the entrypoint loads", v.Name, v.Sample)
			}
		}
	}
	// With prefix delegation on, the entrypoint checks the warm targets.
	entrypointLoad(map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "ENABLE_POD_ENI": "true"}, read)
	// In IPv6 mode it reads the IPv4 egress plugin's log file instead.
	entrypointLoad(map[string]string{"ENABLE_IPv6": "true"}, read)
	for _, v := range envinventory.All {
		if v.Reads(envinventory.Entrypoint) {
			assert.True(t, read[v.Name], "the entrypoint never looks up %s", v.Name)
		}
	}
	for name := range read {
		if v, ok := envinventory.Lookup(name); !ok || !v.Reads(envinventory.Entrypoint) {
			t.Errorf("the entrypoint reads %s, which test/envinventory does not say it reads: add it (and to docs/upgrade.md)", name)
		}
	}
}
