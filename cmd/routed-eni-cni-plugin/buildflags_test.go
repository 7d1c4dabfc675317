package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/test/buildutil"
)

// TestHarnessBuildsLikeMakefile keeps buildutil.ImageFlags (what the tests and
// benchmarks exec) in step with the Makefile's build of aws-cni.
func TestHarnessBuildsLikeMakefile(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	mk := string(b)
	tags := regexp.MustCompile(`(?m)^BUILD_TAGS\s*:=\s*(.*)$`).FindStringSubmatch(mk)
	ld := regexp.MustCompile(`(?m)^LDFLAGS\s*:=\s*(.*)$`).FindStringSubmatch(mk)
	if tags == nil || ld == nil {
		t.Fatal("Makefile defines no BUILD_TAGS or LDFLAGS")
	}
	line := "CGO_ENABLED=0 $(GO) build -trimpath -tags '$(BUILD_TAGS)' -ldflags '$(LDFLAGS)' -o $(BUILD_DIR)/aws-cni ./cmd/routed-eni-cni-plugin"
	if !strings.Contains(mk, line) {
		t.Errorf("the Makefile's aws-cni build is no longer %q; update buildutil.ImageFlags", line)
	}
	want := []string{"-trimpath", "-tags", strings.TrimSpace(tags[1]), "-ldflags",
		strings.TrimSpace(strings.Split(ld[1], "-X")[0])}
	if strings.Join(want, "|") != strings.Join(buildutil.ImageFlags, "|") {
		t.Errorf("buildutil.ImageFlags = %q, the Makefile builds with %q", buildutil.ImageFlags, want)
	}
}
