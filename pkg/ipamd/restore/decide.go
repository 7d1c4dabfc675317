package restore

import "github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"

// Evidence is what a start knows about its checkpoint.
type Evidence struct {
	// Fresh: the node holds nothing a pod could use (Fresh).
	Fresh bool
	// Missing: there was no checkpoint file. Corrupt: it did not parse
	// (the datastore moved it aside). Unreadable: it could not be read for
	// another reason.
	Missing, Corrupt, Unreadable bool
	// Marker is what the rebuild marker an earlier start left records
	// ("" when there is none).
	Marker podip.RebuildReason
	// Partial: entries could not be restored because their address is on
	// none of the node's ENIs (not yet: they stay in the checkpoint), or
	// ENIs were left out at start.
	Partial bool
	// Runtime: there is a runtime to check addresses against (the
	// reconciler runs and new addresses join the pool pending).
	Runtime bool
}

// Action is what a start does.
type Action int

const (
	// Refuse: the checkpoint could not be read; handing out addresses
	// could give away one a running pod holds.
	Refuse Action = iota
	// WithoutRuntime: nothing to check addresses against.
	// podip.StartWithoutRuntime starts as upstream does or, after a
	// corrupt checkpoint with the reconciler wanted, refuses.
	WithoutRuntime
	// Clean: the checkpoint describes every address in use, so an empty
	// sandbox list may verify the addresses that were not in it.
	Clean
	// Rebuild: every address is checked against the runtime before any
	// ADD is served, and the rebuild marker kept until that is done.
	Rebuild
)

// Plan is a decided start.
type Plan struct {
	Action Action
	// Lost and Corrupt are what podip.StartWithoutRuntime is told
	// (WithoutRuntime): the checkpoint was lost, and it was corrupt now or
	// at an earlier start.
	Lost, Corrupt bool
	// Reason is what the rebuild marker records (Rebuild).
	Reason podip.RebuildReason
	// Clean (WithoutRuntime): nothing was lost or left out, so addresses
	// that join once a runtime answers are checked as after a clean start.
	Clean bool
}

// Decide picks the start from the evidence alone.
func Decide(e Evidence) Plan {
	if e.Unreadable {
		return Plan{Action: Refuse}
	}
	// A fresh node has nothing to lose. Otherwise a checkpoint that is
	// missing, corrupt, or was lost at an earlier start is lost.
	lost := !e.Fresh && (e.Missing || e.Corrupt || e.Marker != "")
	if !e.Runtime {
		return Plan{Action: WithoutRuntime, Lost: lost, Corrupt: e.Corrupt || e.Marker == podip.RebuildCorrupt, Clean: !lost && !e.Partial}
	}
	// Entries or ENIs left out: the start is not clean either.
	if !lost && !e.Partial {
		return Plan{Action: Clean}
	}
	reason := e.Marker
	switch {
	case e.Corrupt:
		reason = podip.RebuildCorrupt
	case reason == "":
		reason = podip.RebuildMissing
	}
	return Plan{Action: Rebuild, Reason: reason}
}
