// Package networkutils owns the node's host-side network state that ipamd
// manages: the primary ENI's MTU, the policy-routing rules at priorities
// 1024 (connmark → main), 1535 (external service CIDRs → main) and 32765
// (from an ENI's primary IP → that ENI's table), the per-ENI route tables
// and addresses, the IPv4 iptables rules for SNAT and connmark in the
// nat and mangle tables, and the filter FORWARD rule (iptables or
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
// (ip rules), by its chain (AWS-SNAT-CHAIN-0, AWS-CONNMARK-CHAIN-0), or by
// one of our comments in a shared built-in chain; nothing else is removed.

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
// Upstream picks a connmark backend from `iptables --version`: the
// iptables rules of the nat table on iptables-legacy hosts, a native
// nftables table (`ip aws-cni`, base chain at priority -90) otherwise. This
// package implements only the iptables backend and uses it on both
// iptables-legacy and iptables-nft hosts. The iptables binary is the one
// interface that works against either kernel backend, so a single, tested
// code path programs both kinds of node, and no nftables netlink library is
// needed. The trade-off is the one upstream legacy hosts already live
// with: our nat PREROUTING chain runs in rule order inside the nat hook, so
// a connection DNATed by an earlier rule there (kube-proxy's service jump)
// is not connmarked, whereas upstream's nftables chain at priority -90
// sees the post-DNAT address. Like upstream's iptables backend, the first
// successful connmark reconcile deletes the nftables table `ip aws-cni`
// (when the nft tool is installed), so a node previously run by upstream's
// nftables backend does not keep two markers with diverging exemptions.
//
// # Namespaces
//
// New can target a network namespace (WithNetNS). Netlink work then uses a
// handle whose socket lives in that namespace; iptables and nft are run as
// child processes forked from an OS thread that is locked and switched
// into the namespace for the duration of the call (containernetworking's
// ns.Do), so the child inherits the namespace. Tests rely on this to work
// only inside namespaces they create.
package networkutils
