package helmtest

import (
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd"
)

// checkIPv6 checks the IPv6 values beyond the environment: the node agent
// runs in IPv6 mode, and the aws-node environment is one ipamd accepts
// and runs in IPv6 mode with prefix delegation.
func checkIPv6(t *testing.T, r *rendered) {
	agent := container(t, r.daemonSet.Spec.Template.Spec.Containers, "aws-eks-nodeagent")
	if !contains(agent.Args, "--enable-ipv6=true") {
		t.Errorf("node agent args %v lack --enable-ipv6=true", agent.Args)
	}
	env := envValues(r.awsNode(t))
	cfg, err := ipamd.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("ipamd refuses the rendered environment: %v", err)
	}
	if !cfg.EnableIPv6 || cfg.EnableIPv4 || !cfg.PrefixDelegation {
		t.Errorf("ipamd config IPv6=%t IPv4=%t PD=%t, want true false true", cfg.EnableIPv6, cfg.EnableIPv4, cfg.PrefixDelegation)
	}
}
