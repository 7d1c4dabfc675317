// Package networkutils owns the node's host-side network state that ipamd
// manages: the primary ENI's MTU, the policy-routing rules at priorities
// 1024 (connmark → main), 1535 (external service CIDRs → main) and 32765
// (from an ENI's primary IP → that ENI's table), the per-ENI route tables
// and addresses, the IPv4 iptables rules for SNAT and connmark in the
// nat and mangle tables (or, for pod connmark on non-legacy hosts, the
// nftables table `ip aws-cni`), and the filter FORWARD rule (iptables or
// ip6tables) that rejects new connections into the egress plugin's pod
// range. It never touches pod-side state (pod veths, the
// per-pod rules at 512/1536, anything inside a pod's namespace): that
// belongs to the CNI plugin (ipamd removes a gone pod's 512/1536 rules
// through pkg/podrules, which the plugin shares, not through this
// package). It never imports pkg/ipamd/... (ipamd drives
// it) nor the plugin's packages under cmd/.
//
// Every operation is idempotent and reconciles: it adds what is missing,
// leaves what is already right untouched (a second run changes nothing,
// not even rule order), and removes rules it owns that are no longer
// wanted. Ownership is narrow: a rule is ours by its priority and table
// (ip rules), by its chain (AWS-SNAT-CHAIN-0, AWS-CONNMARK-CHAIN-0), by its
// nftables table (`ip aws-cni`), or by one of our comments in a shared
// built-in chain; nothing else is removed.

// # IPv6 mode
//
// With Config.IPv6 (ENABLE_IPv6, handed over by ipamd) the package does
// what upstream does for an IPv6 cluster: the fwmark rule is an IPv6
// rule, no SNAT or connmark rule is programmed (pods' IPv6 addresses are
// routable; the egress plugin SNATs their IPv4 egress itself), IPv4 SNAT
// rules already on the node are left alone, and forwarded NEW connections
// to 169.254.172.0/22 are rejected. In an IPv4 cluster with
// Config.V6Egress (ENABLE_V6_EGRESS) the same is done for fd00::ac:0/118
// with ip6tables. SetupENINetwork and TeardownENINetwork follow the ENI's
// primary IP family (IPv6 gateway fe80:ec2::1).
//
// # Connmark backend
//
// The connmark of SNATed pod traffic has two backends, chosen once per
// process from `iptables --version` as upstream does (ConnmarkBackend, the
// awscni_connmark_backend gauge): output containing "legacy" selects the
// iptables backend, anything else the nftables backend.
//
// The iptables backend (iptables-legacy hosts) jumps from nat PREROUTING
// to AWS-CONNMARK-CHAIN-0 and restores the mark after the jump. It runs in
// rule order inside the nat hook, so a connection that kube-proxy DNATs
// earlier in the same chain is not connmarked; that is upstream's
// behaviour on legacy hosts too. Its first success deletes the nftables
// table `ip aws-cni` (over netlink: the image has no nft tool).
//
// The nftables backend (every other host) programs the native table
// `ip aws-cni` over netlink (github.com/google/nftables): base chain
// nat-prerouting (type nat, hook prerouting, priority -90, policy accept)
// with exactly `fib daddr type local return`, `iifname "<prefix>*" counter
// jump snat-mark` and `counter meta mark set ct mark & <mark>`, and regular
// chain snat-mark with `ip daddr <cidr> counter return` per exempt CIDR
// before `counter ct mark set ct mark | <mark>`. Priority -90 runs after
// every DNAT chain at -100 (kube-proxy's, in iptables-nft or nftables
// mode), so ClusterIPs are never marked. But the kernel runs a hook's nat
// chains only until one of them NATs the connection: a Service connection
// that kube-proxy DNATs never reaches this chain and is not marked. That
// is right for an endpoint in the VPC (it leaves through the pod's ENI)
// and wrong for one outside it (its first packet leaves through a
// secondary ENI; the primary-ENI connmark of the reply marks the rest), as
// with upstream's identical layout; a filter-type chain at -90 would see
// it. Rules are encoded the way the nft tool encodes the same text, so a
// table written by either compares equal. Reconcile: base rules missing or
// out of order are flushed and refilled; a base chain with another
// type/hook/priority/policy is deleted and recreated; unknown snat-mark
// rules and CIDRs no longer wanted are deleted one by one, new CIDRs
// inserted at the top; other chains in the table (an earlier writer's)
// are deleted; external SNAT deletes the table. Its first success
// removes the iptables backend's rules (our PREROUTING jump and restore
// rule, and AWS-CONNMARK-CHAIN-0) through the node's iptables and, when
// installed, through iptables-legacy (an agent whose iptables was legacy
// left them in the tables the kernel still runs), so a node switched
// between backends is never marked by two diverging rule sets. When
// `iptables --version` gives no answer (10 s at most), the nftables
// backend is chosen, as upstream does, and the log says why.
//
// # Namespaces
//
// New can target a network namespace (WithNetNS). Netlink work then uses a
// handle whose socket lives in that namespace (nf_tables too: its netlink
// socket is opened in the namespace's fd); iptables is run as
// child processes forked from an OS thread that is locked and switched
// into the namespace for the duration of the call (containernetworking's
// ns.Do), so the child inherits the namespace. Tests rely on this to work
// only inside namespaces they create.
package networkutils
