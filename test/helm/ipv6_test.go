package helmtest

import (
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd"
)

// The IPv6 values render as upstream's chart renders them, and the
// aws-node container's environment is one ipamd accepts and runs in IPv6
// mode with prefix delegation.
func TestIPv6Values(t *testing.T) {
	r := renderObjects(t, valuesFile(t, "ipv6.yaml"))
	env := envValues(r.awsNode(t))
	for k, want := range map[string]string{"ENABLE_IPv6": "true", "ENABLE_IPv4": "false",
		"ENABLE_PREFIX_DELEGATION": "true", "ENABLE_V4_EGRESS": "true"} {
		if env[k] != want {
			t.Errorf("aws-node %s=%q, want %q", k, env[k], want)
		}
	}
	spec := r.daemonSet.Spec.Template.Spec
	if got := envValues(container(t, spec.InitContainers, "aws-vpc-cni-init"))["ENABLE_IPv6"]; got != "true" {
		t.Errorf("init ENABLE_IPv6=%q, want true (the init container writes the IPv6 sysctls)", got)
	}
	if !contains(container(t, spec.Containers, "aws-eks-nodeagent").Args, "--enable-ipv6=true") {
		t.Errorf("node agent args %v lack --enable-ipv6=true", container(t, spec.Containers, "aws-eks-nodeagent").Args)
	}

	cfg, err := ipamd.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("ipamd refuses the rendered environment: %v", err)
	}
	if !cfg.EnableIPv6 || cfg.EnableIPv4 || !cfg.PrefixDelegation {
		t.Errorf("ipamd config IPv6=%t IPv4=%t PD=%t, want true false true", cfg.EnableIPv6, cfg.EnableIPv4, cfg.PrefixDelegation)
	}
}
