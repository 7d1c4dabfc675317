// Package version holds the build's version strings. It never imports a
// package of this module outside pkg/utils, so every binary can link it.
package version

// Version is the release this binary was built from, stamped at build time
// with -ldflags "-X github.com/aws/amazon-vpc-cni-k8s/pkg/version.Version=...".
// It is reported in logs and in the awscni_build_info metric.
var Version = "dev"

// RPCVersion is the string the CNI plugin sends as ClientVersion and ipamd
// requires it to equal. Upstream release builds stamp an empty string on both
// sides (their Makefile's -X paths match no variable), so an empty value is
// what lets our plugin and ipamd interoperate with theirs in both directions.
var RPCVersion = ""
