// Package ipamcheck is `aws-k8s-agent ipam-check`: run on a node, it reads
// ipamd's introspection (/v1/enis, /v1/reconciler, and /v1/subnets for
// the free addresses of the ENIs' subnets) and the container
// runtime's pod sandboxes (CRI ListPodSandbox) and prints, per pod
// address, whether it is live, in flight, a leaked candidate, cooling
// down or unassigned, then a summary; -o json for scripts. The exit code
// says whether leaked candidates were found (1), none were (0), or the
// check could not be made (2).
//
// Its verdicts follow the pod-IP reconciler's rules (pkg/ipamd/podip): a
// sandbox the runtime lists owns its address; an allocation within the
// grace period may have its ADD in flight; the reconciler's own
// candidates give when an absence was first seen.
//
// It never changes anything: it makes only HTTP GETs to the introspection
// endpoint and CRI list calls. It never imports the agent (pkg/ipamd) or
// its jobs beyond the types podip, the datastore and subnetfigures serve.
//
// Files: fetch.go (introspection client), runtime.go (sandbox list),
// classify.go (the verdicts, pure), subnets.go (the subnets' part of the
// report, pure), render.go (table and JSON), flags.go
// (flags and their defaults), check.go (order of reads, exit codes).
package ipamcheck
