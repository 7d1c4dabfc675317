package rpcserver

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzValidateRequest(f *testing.F) {
	f.Add("0123abcd", "eth0", "aws-cni", "web-0", "default")
	f.Add("", "eth0", "aws-cni", "", "")
	f.Add("c", strings.Repeat("e", 16), "n", "p", "ns")
	f.Add("c", "eth0", "n", "\xff\xfe", "ns")
	f.Fuzz(func(t *testing.T, id, ifName, network, pod, ns string) {
		k, p := keyFields(id, ifName, network), podFields(pod, ns, id)
		reason, err := validate(append(k[:], p[:]...)...)
		if (err == nil) != (reason == "") {
			t.Fatalf("reason %q and error %v disagree", reason, err)
		}
		ok := id != "" && ifName != "" && network != "" &&
			len(id) <= maxIDLen && len(ifName) <= maxIfNameLen && len(network) <= maxIDLen &&
			len(pod) <= maxK8sNameLen && len(ns) <= maxK8sNameLen &&
			utf8.ValidString(id) && utf8.ValidString(ifName) && utf8.ValidString(network) &&
			utf8.ValidString(pod) && utf8.ValidString(ns)
		if ok != (err == nil) {
			t.Fatalf("validate(%q,%q,%q,%q,%q) = %v, want ok=%v", id, ifName, network, pod, ns, err, ok)
		}
	})
}
