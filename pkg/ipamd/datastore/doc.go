// Package datastore owns ipamd's view of the node's addresses: the ENIs, the
// secondary IPv4 addresses (/32) and /28 prefixes attached to them (or, in
// an IPv6 datastore, their IPv6 /80 prefixes), and which pod sandbox holds
// each address.
//
// It guarantees that:
//   - an address is held by at most one IPAMKey, and a repeated assign for the
//     same key returns the same address;
//   - a released address is not handed out again before its cooldown ends;
//   - no address of an ENI excluded for pod IPs (SetExcluded) is handed out,
//     while the allocations already on it keep working;
//   - an assign or release is reported done only once the checkpoint that
//     records it is durable: it has atomically replaced the file, so any
//     later ipamd process reads it (not fsynced: docs/checkpoint-durability.md);
//     concurrent callers share one write (group commit);
//   - assign and release cost O(1) whatever the pool size: free addresses are
//     indexed, never found by scanning ENIs (IPv6: a walk over the node's
//     few /80s); a /80's 2^48 addresses are never enumerated, its state
//     grows only with the addresses handed out.
//
// It never talks to EC2, the kernel or Kubernetes; its only I/O goes through
// the Checkpointer it is given. It never imports the agent (pkg/ipamd) or
// any other package under it (pool, podip, rpcserver, warmpool), the
// simulators, the AWS SDK, client-go, gRPC or Prometheus, and its tests
// keep to the same rule.
package datastore
