// Package restore owns how ipamd starts from its checkpoint. It loads the
// checkpoint into the datastore and gathers the evidence of whether the
// checkpoint still describes every address a running pod may hold (a
// fresh node, a missing or corrupt file, the rebuild marker an earlier
// start left, entries whose address is on none of the node's ENIs, ENIs
// left out at start); Decide, a pure function of that evidence, picks the
// start: refuse, start without a runtime, start clean, or rebuild against
// the container runtime; then the plan is applied through the pod-IP
// reconciler (podip.go is the one file that calls podip).
//
// It never starts clean when the checkpoint may not describe every
// address in use, never starts after a checkpoint that could not be read
// for any reason but corruption, and never assigns or frees an address
// itself: adoption and release are the reconciler's. It never imports the
// agent.
package restore
