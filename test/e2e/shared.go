package e2e

import (
	"errors"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// What other test packages that build nodes (test/kubenode) share with
// this one: the registry a killed run is swept by, the sweep itself, and
// the forwarder into a node's namespace. One registry and one sweep for
// every such binary, so a run of either leaves nothing behind.

// RecordDir notes, for the sweep, a node directory another package made:
// processes naming it are killed, mounts below it undone, and the
// directory removed.
func RecordDir(path string) error { return record(recDir, path) }

// RecordCgroup notes a cgroup (relative to each hierarchy, "e2e-..."): its
// processes are killed and the tree removed.
func RecordCgroup(rel string) error { return record(recCgroup, rel) }

// SweepEarlierRuns cleans after killed runs of any e2e binary (call it
// first in TestMain).
func SweepEarlierRuns() { sweepEarlierRuns() }

// SweepThisRun cleans what this binary's teardowns left (call it last in
// TestMain).
func SweepThisRun() { sweepThisRun() }

// ForwardInto listens on listen (host:port) inside the node's namespace
// and forwards every connection to target, dialled from this process's
// namespace (the host's loopback). stop closes the listener and every
// connection.
func ForwardInto(node ns.NetNS, listen, target string) (stop func(), err error) {
	f, err := startAPIForwarder(node, listen, target)
	if err != nil {
		return nil, err
	}
	return f.Close, nil
}

// KillCgroup kills every process in the cgroup tree rel (in every
// hierarchy), waits for them to go and removes the tree, children first:
// a node that ran wholly inside rel ends with nothing left running.
func KillCgroup(rel string) error {
	dirs := cgroupDirs(rel)
	var errs []error
	for try := 0; try < 50; try++ {
		pids := cgroupProcs(dirs)
		errs = killPIDs(pids, "process")
		if len(pids) == 0 {
			if _, errs = removeCgroupTree(dirs); len(errs) == 0 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Join(errs...)
}

// ImportImage loads a docker-archive tarball into the k8s.io namespace of
// the containerd at sock with that containerd's ctr.
func ImportImage(ctr, sock, tar string) error { return importImage(ctr, sock, tar) }
