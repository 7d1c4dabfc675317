package restore

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
)

func TestDecide(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   Evidence
		want Plan
	}{
		{"unreadable refuses, whatever else", Evidence{Unreadable: true, Fresh: true, Runtime: true}, Plan{Action: Refuse}},
		{"intact checkpoint", Evidence{Runtime: true}, Plan{Action: Clean}},
		{"fresh node without a checkpoint", Evidence{Fresh: true, Missing: true, Runtime: true}, Plan{Action: Clean}},
		{"fresh node, corrupt file: nothing to lose", Evidence{Fresh: true, Corrupt: true, Runtime: true}, Plan{Action: Clean}},
		{"missing", Evidence{Missing: true, Runtime: true}, Plan{Action: Rebuild, Reason: podip.RebuildMissing}},
		{"corrupt", Evidence{Corrupt: true, Runtime: true}, Plan{Action: Rebuild, Reason: podip.RebuildCorrupt}},
		{"corrupt wins over a missing marker", Evidence{Corrupt: true, Marker: podip.RebuildMissing, Runtime: true},
			Plan{Action: Rebuild, Reason: podip.RebuildCorrupt}},
		{"an earlier start's marker is kept", Evidence{Marker: podip.RebuildCorrupt, Runtime: true},
			Plan{Action: Rebuild, Reason: podip.RebuildCorrupt}},
		{"entries dropped or ENIs left out", Evidence{Partial: true, Runtime: true}, Plan{Action: Rebuild, Reason: podip.RebuildMissing}},
		{"partial on a fresh node", Evidence{Fresh: true, Partial: true, Runtime: true}, Plan{Action: Rebuild, Reason: podip.RebuildMissing}},
		{"no runtime, intact: clean for a runtime that answers later", Evidence{}, Plan{Action: WithoutRuntime, Clean: true}},
		{"no runtime, partial is not lost, nor clean", Evidence{Partial: true}, Plan{Action: WithoutRuntime}},
		{"no runtime, missing", Evidence{Missing: true}, Plan{Action: WithoutRuntime, Lost: true}},
		{"no runtime, corrupt", Evidence{Corrupt: true}, Plan{Action: WithoutRuntime, Lost: true, Corrupt: true}},
		{"no runtime, corrupt at an earlier start", Evidence{Marker: podip.RebuildCorrupt}, Plan{Action: WithoutRuntime, Lost: true, Corrupt: true}},
		{"no runtime, fresh node with a corrupt marker", Evidence{Fresh: true, Marker: podip.RebuildCorrupt},
			Plan{Action: WithoutRuntime, Corrupt: true, Clean: true}},
	} {
		assert.Equal(t, c.want, Decide(c.ev), c.name)
	}
}
