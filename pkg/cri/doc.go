// Package cri is ipamd's read-only client of the container runtime's CRI
// RuntimeService (k8s.io/cri-api v1) over its unix socket: it lists pod
// sandboxes in every state and reads one sandbox's status (its pod IP).
//
// It never creates, stops or removes anything, and every call carries a
// timeout so a hung runtime cannot stall ipamd.
package cri
