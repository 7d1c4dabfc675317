#!/usr/bin/env bash
# The one set-up behind `make test`, `make check` and CI (.ci/run).
#
#   system  as root, installs through apt what the real-kernel tests
#           (network namespaces, iptables, nft) and the end-to-end suite
#           (containerd, runc) need, only when something is missing; not
#           root: installs nothing and says so in one line.
#   tools   installs the pinned analysers `make check` runs (staticcheck,
#           deadcode) with `go install`, when missing or at another version.
#   components
#           as root, builds once the real components beyond Debian's
#           (containerd 2, CRI-O, etcd, Kubernetes, the VM harness's
#           kernel and initramfs) into their cache
#           (scripts/ci/components.sh; about 12 minutes the first time, a
#           line per component after that); not root: builds nothing
#           unless E2E_COMPONENTS_DIR names a directory to build into.
#
# usage: scripts/ci/setup.sh [system] [tools] [components]  (no argument: all)
# Quiet when there is nothing to do. An install that fails is an error on CI
# (CI=true), a warning elsewhere: the skipped tests are then listed at the
# end of `make test`.
set -euo pipefail

# honnef.co/go/tools v0.8.x supports Go 1.26; golang.org/x/tools is deadcode's.
STATICCHECK_VERSION=v0.8.2
XTOOLS_VERSION=v0.52.0

GO=${GO:-go}
command -v "$GO" >/dev/null 2>&1 || GO=/usr/local/go/bin/go

note() { echo "setup: $*"; }

failed() {
	if [ "${CI:-}" = true ]; then
		note "error: $*"
		exit 1
	fi
	note "warning: $*"
}

# tool -> Debian package; every tool some test looks up on PATH.
system() {
	local need=() tool pkg
	while read -r tool pkg; do
		command -v "$tool" >/dev/null 2>&1 || need+=("$pkg")
	done <<-EOF
		ip iproute2
		iptables iptables
		nft nftables
		nsenter util-linux
		unshare util-linux
		mount mount
		containerd containerd
		ctr containerd
		containerd-shim-runc-v2 containerd
		runc runc
	EOF
	if [ "$(id -u)" -ne 0 ]; then
		note "not root: installing nothing; the real-kernel and end-to-end tests will be skipped${need:+ (missing: $(printf '%s\n' "${need[@]}" | sort -u | xargs))}"
		return 0
	fi
	[ ${#need[@]} -gt 0 ] || return 0
	mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
	if ! command -v apt-get >/dev/null 2>&1; then
		failed "no apt-get: install ${need[*]} by hand"
		return 0
	fi
	note "installing ${need[*]} (apt)"
	local log
	log=$(mktemp)
	if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"; } >"$log" 2>&1; then
		cat "$log"
		rm -f "$log"
		failed "apt-get install ${need[*]} failed"
		return 0
	fi
	rm -f "$log"
}

# tools_bin is where `go install` puts binaries; the Makefile computes the same.
tools_bin() {
	local bin
	bin=$("$GO" env GOBIN)
	[ -n "$bin" ] || bin="$("$GO" env GOPATH | cut -d: -f1)/bin"
	echo "$bin"
}

# install NAME PACKAGE VERSION: go install PACKAGE@VERSION unless NAME in
# tools_bin was built from that module version.
install_tool() {
	local bin have
	bin="$(tools_bin)/$1"
	have=$("$GO" version -m "$bin" 2>/dev/null | awk '$1 == "mod" { print $3 }') || true
	[ "$have" = "$3" ] && return 0
	note "installing $1 $3 (go install)"
	"$GO" install "$2@$3" || failed "go install $2@$3 failed"
}

tools() {
	install_tool staticcheck honnef.co/go/tools/cmd/staticcheck "$STATICCHECK_VERSION"
	install_tool deadcode golang.org/x/tools/cmd/deadcode "$XTOOLS_VERSION"
}

components() {
	if [ "$(id -u)" -ne 0 ] && [ -z "${E2E_COMPONENTS_DIR:-}" ]; then
		note "not root: building no components (scripts/ci/components.sh; or set E2E_COMPONENTS_DIR to a writable directory)"
		return 0
	fi
	GO="$GO" "$(dirname "$0")/components.sh" all
}

[ $# -gt 0 ] || set -- system tools components
for step in "$@"; do
	case "$step" in
	system | tools | components) "$step" ;;
	*)
		echo "usage: $0 [system] [tools] [components]" >&2
		exit 2
		;;
	esac
done
