// Package delqueue is the on-host queue of CNI DELs that could not reach
// ipamd. The aws-cni plugin writes an entry when ipamd is unreachable during
// DEL (it still tears down and reports success, so pod deletion is never
// blocked); ipamd replays the entries at start and on every reconcile pass,
// so the common lost-DEL case (ipamd restarting) reclaims in seconds.
//
// Format: one file per pod interface in the queue directory (default
// /var/run/aws-node/del-queue), named <containerID>_<ifName>.json, holding
// one JSON object:
//
//	{"version":1,"containerID":"<sandbox id>","ifName":"eth0","networkName":"aws-cni",
//	 "podNamespace":"default","podName":"web-0","podUID":"...","reason":"ipamd unreachable",
//	 "queuedAt":"2026-11-29T18:00:00.123Z"}
//
// Files are written atomically (temp file, fsync, rename) so a reader never
// sees a partial entry; unreadable files are reported and left for the
// operator. Replaying an entry is idempotent: a DEL for a key that holds
// nothing frees nothing and succeeds. queuedAt tells one write from the
// next for the same interface; ipamd compares it with no clock of its own
// (the wall clock may have stepped since).
//
// The queue never loses a DEL nobody replayed: Remove deletes only the
// entry that was read (a newer one the plugin wrote for the same interface
// in the meantime stays queued), taking the file away under a private
// ".taken-*" name before looking at it; List puts back any taken file a
// crash left behind.
//
// It never imports pkg/ipamd/...: the plugin links it to write and ipamd to
// replay, so it needs nothing but the standard library.
package delqueue
