// Package addfail explains an ADD that got no address: from what ipamd
// knows at that moment (the pool's figures, its limits, what pool growth
// is doing or waiting for, the pod-IP reconciler's leak candidates and
// the check of new addresses against the runtime) it picks the one cause
// that stands between the pod and an address and words it as one line.
//
// Each cause has a stable reason (the label of
// awscni_ipamd_add_failures_total and the start of every line, see
// Reasons) and a stable phrase; the figures and times after it vary. The
// lines are documented in docs/add-failures.md so that people can alert
// on them. The package is pure: the caller gathers the State.
package addfail
