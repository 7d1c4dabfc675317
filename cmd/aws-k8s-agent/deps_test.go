package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/test/buildutil"
)

// TestImageBuildLinksNoTemplate keeps text/template out of the agent as
// the image builds it. Its reflect-based method calls make the linker keep
// every exported method of every type converted to an interface: with it
// (gRPC's request tracing, left out by the grpcnotrace tag, brings it in)
// the EC2 client's hundreds of methods stay and the agent's text more than
// doubles, and so does the share of its resident memory that is the
// binary's pages.
func TestImageBuildLinksNoTemplate(t *testing.T) {
	i := slices.Index(buildutil.ImageFlags, "-tags")
	require.GreaterOrEqual(t, i, 0, "buildutil.ImageFlags has no -tags")
	out, err := exec.Command("go", "list", "-tags", buildutil.ImageFlags[i+1], "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "google.golang.org/grpc", "the package list is the agent's")
	for _, p := range []string{"text/template", "html/template"} {
		require.NotContains(t, deps, p, "the agent links %s; go list -deps shows which import brings it", p)
	}
}
