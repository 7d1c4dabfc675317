// Package warmpool owns the warm-pool sizing math of the node agent and
// nothing else.
//
// Given a snapshot of the node's address pool (Stats) and the operator's
// knobs and the node's limits (Config), it answers: how many addresses,
// /28 prefixes or ENIs should the agent add or give back right now,
// without growing past the pod limit (MaxPods) or the address capacity
// (MaxAddresses); and is the pool full in a way that suggests leaked
// addresses? Every function here is pure: no I/O, no clocks, no globals,
// no logging. The package never calls EC2, never reads or writes the
// datastore and never decides *which* address or prefix to release;
// callers gather Stats, call Decide and act on the returned Decision.
// It never imports anything but a few pure standard-library packages
// (fmt, math and the like; the list is in test/imports).
//
// All functions accept any int values. Negative counts are treated as 0,
// targets and limits <= 0 mean "unset" or "unknown", and every product or
// sum that could exceed math.MaxInt saturates instead of wrapping, so no
// input can panic or overflow.
package warmpool
