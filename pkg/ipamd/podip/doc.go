// Package podip owns the pod IPs against the container runtime: the one
// release decision (reclaim.go) by which the periodic pass, the reclaim
// for an ADD that found the pool exhausted and CNI GC free allocations
// whose sandbox is gone (lost CNI DELs); the check of every address that
// joins the pool against the runtime's sandboxes (adopted when a live
// sandbox holds it); the rebuild after a lost checkpoint and its marker
// (rebuild.go); and the replay of DELs the plugin queued while ipamd was
// down. docs/pod-ip-reconciler.md states its rules; "is this address in
// use?" has one answer (inuse.go) on the runtime's word, which one owner
// gathers (runtimeview.go), the only caller of the runtime. On a network
// card above 0 the runtime's IPs do not cover the card (it reports a
// multi-NIC pod's first interface only): cardcover.go says what then
// keeps a joining address out of the pool.
//
// It never frees an address whose sandbox the runtime lists, nor one a
// live sandbox uses, nor one younger than the grace period, nor one whose
// sandbox the runtime has not said, asked by its ID, that it no longer
// has; and it never hands out an address a live sandbox uses. Before it
// frees an address (a replayed DEL, a leak), the address's node rules go
// through NodeRules, only while the gone pod still holds the address and
// never under the decision lock (noderules.go); a rule it cannot remove
// never holds the release back. It reads
// the runtime only through SandboxSource, in its own types (crisource.go
// adapts pkg/cri), and the datastore only through Store; it never imports
// the agent (pkg/ipamd), the pool manager or EC2.
package podip
