// Package podip owns the pod IPs against the container runtime: the
// periodic pod-IP reconciler that frees allocations whose sandbox is gone
// (lost CNI DELs), the check of every address that joins the pool against
// the runtime's sandboxes (adopted when a live sandbox holds it), the
// rebuild after a lost checkpoint, CNI GC, the inline reclaim for an ADD
// that finds the pool exhausted, and the replay of DELs the plugin queued
// while ipamd was down. docs/pod-ip-reconciler.md states its rules.
//
// It never frees an address whose sandbox the runtime lists, nor one a
// listed sandbox uses, nor one younger than the grace period, and it never hands out an address a live
// sandbox uses. It talks to the runtime only through SandboxSource and to
// the datastore only through Store; it never imports the agent
// (pkg/ipamd), the pool manager or EC2.
package podip
