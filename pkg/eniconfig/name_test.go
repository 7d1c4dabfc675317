package eniconfig

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestName(t *testing.T) {
	custom := Keys{Annotation: "example.com/eni-annotation", Label: "topology.kubernetes.io/zone"}
	m := func(kv ...string) map[string]string {
		out := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name                string
		labels, annotations map[string]string
		keys                Keys
		want                string
	}{
		{name: "nothing set", want: DefaultName},
		{name: "nil maps, custom keys", keys: custom, want: DefaultName},
		{name: "default label", labels: m(DefaultKey, "from-label"), want: "from-label"},
		{name: "default annotation", annotations: m(DefaultKey, "from-annotation"), want: "from-annotation"},
		{name: "annotation beats label", labels: m(DefaultKey, "from-label"), annotations: m(DefaultKey, "from-annotation"), want: "from-annotation"},
		{name: "external label beats annotation and label", labels: m(ExternalLabel, "external", DefaultKey, "from-label"),
			annotations: m(DefaultKey, "from-annotation"), want: "external"},
		{name: "custom label", labels: m("topology.kubernetes.io/zone", "us-west-2a", DefaultKey, "ignored"), keys: custom, want: "us-west-2a"},
		{name: "custom annotation", annotations: m("example.com/eni-annotation", "pinned", DefaultKey, "ignored"),
			labels: m("topology.kubernetes.io/zone", "us-west-2a"), keys: custom, want: "pinned"},
		{name: "custom keys ignore the default key", labels: m(DefaultKey, "x"), annotations: m(DefaultKey, "y"), keys: custom, want: DefaultName},
		{name: "only the label key customised", annotations: m(DefaultKey, "from-annotation"), labels: m("zone", "z"),
			keys: Keys{Label: "zone"}, want: "from-annotation"},
		{name: "annotation key is not read as a label", labels: m("example.com/eni-annotation", "x"), keys: custom, want: DefaultName},
		{name: "label key is not read as an annotation", annotations: m("topology.kubernetes.io/zone", "x"), keys: custom, want: DefaultName},
		// A present key wins even when empty, as upstream.
		{name: "empty external label", labels: m(ExternalLabel, "", DefaultKey, "from-label"), want: ""},
		{name: "empty annotation", annotations: m(DefaultKey, ""), labels: m(DefaultKey, "from-label"), want: ""},
		{name: "empty label", labels: m(DefaultKey, ""), want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Name(tc.labels, tc.annotations, tc.keys))
		})
	}
}

func TestChooseSaysWhere(t *testing.T) {
	c := choose(map[string]string{"zone": "a"}, nil, Keys{Label: "zone"})
	assert.Equal(t, choice{name: "a", from: `label "zone"`}, c)
	c = choose(nil, map[string]string{DefaultKey: "b"}, Keys{})
	assert.Equal(t, `named by its annotation "k8s.amazonaws.com/eniConfig"`, c.source())
	assert.Contains(t, choose(nil, nil, Keys{}).source(), "default")
}
