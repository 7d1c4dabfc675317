#!/usr/bin/env bash
# aws-cni-support.sh: collect what is needed to debug the Amazon VPC CNI on
# this node into one archive. The init container copies it to the host's
# /opt/cni/bin next to the CNI plugins, as upstream's image does; run it on
# the node as root:
#
#   sudo /opt/cni/bin/aws-cni-support.sh
#
# It only reads: logs, ipamd's introspection and metrics endpoints, the
# routing state, the iptables/nftables rules, the relevant sysctls, the CNI
# configuration and the ipamd checkpoint. Each step that fails is noted in
# errors.txt and the collection goes on.
#
# Environment (defaults in brackets):
#   OUT_DIR             where the archive is written [/var/log]
#   LOG_DIR             aws-node's log directory [/var/log/aws-routed-eni]
#   INTROSPECTION       ipamd's introspection address [127.0.0.1:61679]
#   METRICS             ipamd's metrics address [127.0.0.1:61678]
#   HOST_ROOT           prefix of every host file read [empty]
set -uo pipefail

OUT_DIR=${OUT_DIR:-/var/log}
LOG_DIR=${LOG_DIR:-/var/log/aws-routed-eni}
INTROSPECTION=${INTROSPECTION:-127.0.0.1:61679}
METRICS=${METRICS:-127.0.0.1:61678}
HOST_ROOT=${HOST_ROOT:-}

stamp=$(date -u +%Y-%m-%dT%H-%M-%SZ)
name="aws-cni-support-$(hostname 2>/dev/null || echo node)-${stamp}"
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
dest="$work/$name"
mkdir -p "$dest"/{logs,introspection,network,rules,sysctl,cni}

note() { printf '%s\n' "$*" >>"$dest/errors.txt"; }

# run FILE CMD...: CMD's output into FILE; a missing command or a failure
# is noted, never fatal.
run() {
	local out=$1
	shift
	if ! command -v "$1" >/dev/null 2>&1; then
		note "$1: not installed (skipped $out)"
		return
	fi
	"$@" >"$dest/$out" 2>&1 || note "$*: exit $?"
}

# fetch FILE URL: an HTTP GET with curl or wget.
fetch() {
	local out=$1 url=$2
	if command -v curl >/dev/null 2>&1; then
		curl -fsS --max-time 10 "$url" >"$dest/$out" 2>>"$dest/errors.txt" || note "GET $url failed"
	elif command -v wget >/dev/null 2>&1; then
		wget -q -T 10 -O "$dest/$out" "$url" 2>>"$dest/errors.txt" || note "GET $url failed"
	else
		note "neither curl nor wget: skipped $url"
	fi
}

# Logs of aws-node, ipamd, the plugin, the network policy agent.
if [ -d "$HOST_ROOT$LOG_DIR" ]; then
	cp -a "$HOST_ROOT$LOG_DIR/." "$dest/logs/" 2>>"$dest/errors.txt" || note "copy $LOG_DIR failed"
else
	note "$LOG_DIR: no such directory"
fi

# ipamd's view: ENIs and addresses, settings, the pod-IP reconciler, metrics.
for p in enis eni-configs networkutils-env-settings ipamd-env-settings reconciler; do
	fetch "introspection/$p.json" "http://$INTROSPECTION/v1/$p"
done
fetch introspection/metrics.txt "http://$METRICS/metrics"

# Checkpoint of the datastore (addresses handed to pods).
if [ -f "$HOST_ROOT/var/run/aws-node/ipam.json" ]; then
	cp "$HOST_ROOT/var/run/aws-node/ipam.json" "$dest/introspection/ipam.json"
else
	note "/var/run/aws-node/ipam.json: no checkpoint"
fi

# Routing: links, addresses, rules, every route table.
run network/links.txt ip -d link show
run network/addresses.txt ip addr show
run network/rules-v4.txt ip -4 rule show
run network/rules-v6.txt ip -6 rule show
run network/routes-v4.txt ip -4 route show table all
run network/routes-v6.txt ip -6 route show table all
run network/neighbours.txt ip neigh show

# Packet filtering: SNAT and connmark chains.
run rules/iptables-v4.txt iptables-save -c
run rules/iptables-v6.txt ip6tables-save -c
run rules/nftables.txt nft list ruleset

# The sysctls aws-vpc-cni-init and ipamd set.
for k in net/ipv4/conf/all/rp_filter net/ipv4/tcp_early_demux \
	net/ipv4/ip_forward net/ipv6/conf/all/forwarding net/ipv6/conf/all/disable_ipv6; do
	f="$HOST_ROOT/proc/sys/$k"
	if [ -r "$f" ]; then
		printf '%s = %s\n' "$k" "$(cat "$f")" >>"$dest/sysctl/sysctls.txt"
	fi
done
for f in "$HOST_ROOT"/proc/sys/net/ipv4/conf/*/rp_filter; do
	[ -r "$f" ] && printf '%s = %s\n' "${f#"$HOST_ROOT"/proc/sys/}" "$(cat "$f")" >>"$dest/sysctl/rp_filter.txt"
done

# CNI configuration and the installed plugins.
if [ -d "$HOST_ROOT/etc/cni/net.d" ]; then
	cp -a "$HOST_ROOT/etc/cni/net.d/." "$dest/cni/" 2>>"$dest/errors.txt" || note "copy /etc/cni/net.d failed"
fi
ls -l "$HOST_ROOT/opt/cni/bin" >"$dest/cni/bin.txt" 2>&1 || note "ls /opt/cni/bin failed"

# The node's kubelet and runtime, briefly.
run kubelet.txt journalctl -u kubelet --no-pager -n 2000
run containerd.txt journalctl -u containerd --no-pager -n 2000

mkdir -p "$OUT_DIR" || exit 1
archive="$OUT_DIR/$name.tar.gz"
tar -C "$work" -czf "$archive" "$name" || { echo "aws-cni-support: writing $archive failed" >&2; exit 1; }
echo "$archive"
