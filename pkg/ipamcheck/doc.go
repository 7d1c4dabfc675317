// Package ipamcheck is `aws-k8s-agent ipam-check`: run on a node, it reads
// ipamd's introspection (/v1/enis, /v1/reconciler, and /v1/subnets for
// the free addresses of the ENIs' subnets) and the container runtime's pod
// sandboxes (CRI ListPodSandbox) and prints, per pod address, whether it
// is live, in flight, a leaked candidate, in use by another sandbox,
// cooling down or unassigned, then a summary; -o json for scripts. A
// READY sandbox holding no allocation whose address is outside the pool
// (a branch ENI pod under security groups for pods, or a pod another
// plugin networked) is shown as such, never as an anomaly: without the
// API server the check cannot tell which. The exit code says whether
// leaks ipamd confirmed were found (1), none were (0), or the check could
// not be made (2). On a node managing several network cards (one
// datastore each) it reads every card's ENIs (/v1/enis is keyed by card)
// and the reconcilers of all cards (/v1/reconciler, merged): each address
// names its card (a CARD column in the table when there are several; the
// JSON's networkCard always), and the verdicts are those of one card.
//
// Its verdicts follow the pod-IP reconciler's rules (pkg/ipamd/podip): a
// sandbox the runtime lists owns its address; an allocation within the
// grace period may have its ADD in flight. Past it, whether the address
// is in use or leaked is ipamd's one answer, never this check's own (its
// list may be partial): the reconciler's candidate for the allocation
// says when the absence was first seen, whether the runtime confirmed
// the sandbox gone, which sandbox uses the address, and why ipamd keeps
// it. Only a confirmed leak is exit code 1.
//
// It never changes anything: it makes only HTTP GETs to the
// introspection endpoint and CRI list and status calls. It never imports
// the agent (pkg/ipamd) or its jobs beyond the types podip, the datastore
// and subnetfigures serve.
//
// Files: fetch.go (introspection client), runtime.go (sandbox list),
// classify.go (the verdicts, pure), outside.go (addresses outside the
// pool), subnets.go (the subnets' part of the report, pure), render.go
// (table and JSON), flags.go (flags and their defaults), check.go (order
// of reads, exit codes).
package ipamcheck
