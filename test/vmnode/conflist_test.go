package vmnode

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// entrypointValues are what the aws-node entrypoint (cmd/aws-vpc-cni)
// fills the template's placeholders with in an IPv4 cluster with its
// defaults, except podSGEnforcingMode, strict as POD_SECURITY_GROUP_
// ENFORCING_MODE=strict sets it (its default too).
var entrypointValues = map[string]string{
	"__VETHPREFIX__":              "eni",
	"__MTU__":                     "9001",
	"__PODSGENFORCINGMODE__":      "strict",
	"__PLUGINLOGFILE__":           "/var/log/aws-routed-eni/plugin.log",
	"__PLUGINLOGLEVEL__":          "Debug",
	"__EGRESSPLUGINLOGFILE__":     "/var/log/aws-routed-eni/egress-v6-plugin.log",
	"__EGRESSPLUGINENABLED__":     "false",
	"__EGRESSPLUGINIPAMSUBNET__":  "fd00::ac:00/118",
	"__EGRESSPLUGINIPAMDST__":     "::/0",
	"__EGRESSPLUGINIPAMDATADIR__": "/run/cni/v4pd/egress-v6-ipam",
	"__RANDOMIZESNAT__":           "prng",
	"__NODEIP__":                  "",
}

var placeholder = regexp.MustCompile(`__[A-Z][A-Z0-9]*__`)

// writeConflist renders the template into the runtime's CNI directory.
// aws-cni gets no ipamdSocket key: it dials ipamd where a node has it.
func writeConflist(t *testing.T) {
	t.Helper()
	tmpl, err := os.ReadFile(ConflistTemplate)
	if err != nil {
		t.Fatal(err)
	}
	var unknown []string
	out := placeholder.ReplaceAllFunc(tmpl, func(p []byte) []byte {
		v, ok := entrypointValues[string(p)]
		if !ok {
			unknown = append(unknown, string(p))
		}
		return []byte(v)
	})
	if len(unknown) > 0 {
		t.Fatalf("%s has placeholders this test does not fill: %v", ConflistTemplate, unknown)
	}
	if err := os.MkdirAll(cniConfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cniConfDir, "10-aws.conflist"), out, 0o644); err != nil {
		t.Fatal(err)
	}
}
