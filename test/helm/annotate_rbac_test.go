package helmtest

import (
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd"
)

// The ClusterRole grants pods patch exactly when ipamd, reading the
// ANNOTATE_POD_IP the chart puts into aws-node's environment, annotates
// pods: every spelling ipamd's parser takes as true grants it, every other
// (false, blank, unparsable, unset) does not. Upstream's template grants it
// for any non-empty value, "false" included; this chart does not.
func TestPodsPatchFollowsANNOTATE_POD_IP(t *testing.T) {
	cases := []struct {
		name  string
		value interface{} // nil: unset
	}{
		{"unset", nil},
		{"true", "true"},
		{"True", "True"},
		{"TRUE", "TRUE"},
		{"1", "1"},
		{"t", "t"},
		{"YAML bool true", true},
		{"false", "false"},
		{"0", "0"},
		{"YAML bool false", false},
		{"blank", ""},
		{"true with a trailing space", "true "},
		{"1 with blanks around", " 1 "},
		{"yes (not a bool to ipamd)", "yes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vals := map[string]interface{}{}
			if tc.value != nil {
				vals["env"] = map[string]interface{}{"ANNOTATE_POD_IP": tc.value}
			}
			r := renderObjects(t, vals)
			env := envValues(r.awsNode(t))
			v, set := env["ANNOTATE_POD_IP"]
			cfg, err := ipamd.LoadConfig(func(k string) (string, bool) {
				switch k {
				case "ENABLE_IPv4":
					return "true", true
				case "ANNOTATE_POD_IP":
					return v, set
				}
				return "", false
			})
			if err != nil {
				t.Fatalf("ipamd config: %v", err)
			}
			patch := grants(r.clusterRole.Rules)["/pods"]["patch"]
			if patch != cfg.AnnotatePodIP {
				t.Errorf("ANNOTATE_POD_IP=%q (set %v): pods patch granted = %v, ipamd annotates = %v", v, set, patch, cfg.AnnotatePodIP)
			}
			if want := tc.value == "true" || tc.value == "True" || tc.value == "TRUE" || tc.value == "1" || tc.value == "t" || tc.value == true ||
				tc.value == "true " || tc.value == " 1 "; patch != want {
				t.Errorf("pods patch granted = %v, want %v", patch, want)
			}
		})
	}
}
