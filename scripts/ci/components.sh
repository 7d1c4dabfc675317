#!/usr/bin/env bash
# Builds, once, the real components the runtime tests drive beyond Debian's
# packages, from the Go module proxy, into one cache directory:
#
#   ${E2E_COMPONENTS_DIR:-/var/cache/aws-vpc-cni-e2e}/<name>-<version>/bin/
#
# A component counts as present only when its <name>-<version>/.done stamp
# exists; the stamp is written last, so an interrupted build is redone from
# scratch. Versions are pinned in test/components/versions.txt, the one
# place they are set (the Go package test/components reads the same file to
# find the binaries).
#
#   containerd       go install of cmd/{containerd,containerd-shim-runc-v2,ctr}
#   crio             go build of ./cmd/crio from a writable copy of the
#                    module, make -C pinns; apt (root): conmon, skopeo (loads
#                    images into containers-storage), gcc, make, libc6-dev
#                    (pinns is static C)
#   etcd             a generated wrapper module whose main is etcdmain.Main
#   kubernetes       one go build of kube-apiserver, kubelet,
#                    kube-controller-manager, kube-scheduler and kube-proxy
#                    from a writable copy of k8s.io/kubernetes, staging
#                    replaces swapped for the released staging modules
#
# usage: scripts/ci/components.sh [all|containerd2|crio|etcd|kubernetes]
#        scripts/ci/components.sh path NAME     (prints NAME's bin directory)
# (containerd2 and containerd name the same component; kube-apiserver and
# kubelet name kubernetes.) One line per
# component: "components: NAME VERSION ready (built in Ns)" or "... cached".
# First run on 2 cores: about 12 minutes in all, 610 MB (docs/testing.md).
# A build that fails is an error on CI (CI=true), a warning elsewhere.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VERSIONS=$ROOT/test/components/versions.txt
CACHE=${E2E_COMPONENTS_DIR:-/var/cache/aws-vpc-cni-e2e}

GO=${GO:-go}
command -v "$GO" >/dev/null 2>&1 || GO=/usr/local/go/bin/go

# pinned VERSION of NAME, from versions.txt
pinned() {
	local v
	v=$(awk -v n="$1" '$1 == n { print $2 }' "$VERSIONS")
	[ -n "$v" ] || {
		echo "components: $1 not in $VERSIONS" >&2
		exit 2
	}
	echo "$v"
}

CONTAINERD_VERSION=$(pinned containerd)
CRIO_VERSION=$(pinned crio)
ETCD_VERSION=$(pinned etcd)
KUBERNETES_VERSION=$(pinned kubernetes)

# Debian packages CRI-O needs, as "tool package".
CRIO_APT="conmon conmon
skopeo skopeo
cc gcc
make make
strip binutils"

# The builds never switch toolchain, never use a workspace, and do not stamp
# VCS data (the copies are not repositories).
export GOTOOLCHAIN=local GOWORK=off GOFLAGS="-buildvcs=false"

note() { echo "components: $*"; }

failed() {
	if [ "${CI:-}" = true ]; then
		note "error: $*"
		exit 1
	fi
	note "warning: $*"
}

# apt_need LIST: installs, as root, the packages of LIST ("tool package"
# lines) whose tool is missing. Not root: says which are missing.
apt_need() {
	local need=() tool pkg log
	while read -r tool pkg; do
		command -v "$tool" >/dev/null 2>&1 || need+=("$pkg")
	done <<<"$1"
	[ ${#need[@]} -gt 0 ] || return 0
	if [ "$(id -u)" -ne 0 ]; then
		note "not root: not installing ${need[*]}"
		return 0
	fi
	note "installing ${need[*]} (apt)"
	log=$(mktemp)
	if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"; } >"$log" 2>&1; then
		cat "$log"
		rm -f "$log"
		return 1
	fi
	rm -f "$log"
}

# moddir MODULE@VERSION: downloads the module, prints its directory.
moddir() {
	"$GO" mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'
}

# writable_copy MODULE@VERSION DEST: a copy of the module cache's read-only
# directory that go build may write go.mod/go.sum in.
writable_copy() {
	local src
	src=$(moddir "$1")
	[ -n "$src" ] || return 1
	cp -r "$src" "$2"
	chmod -R u+w "$2"
}

build_containerd() { # OUT WORK
	local m=github.com/containerd/containerd/v2/cmd v=v$CONTAINERD_VERSION
	GOBIN=$1 "$GO" install "$m/containerd@$v" "$m/containerd-shim-runc-v2@$v" "$m/ctr@$v"
}

build_crio() { # OUT WORK
	local src=$2/cri-o
	apt_need "$CRIO_APT" || return 1
	writable_copy "github.com/cri-o/cri-o@v$CRIO_VERSION" "$src" || return 1
	(cd "$src" && "$GO" build -trimpath \
		-tags 'containers_image_ostree_stub containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper' \
		-ldflags '-s -w' \
		-o "$1/crio" ./cmd/crio) || return 1
	make -s -C "$src/pinns" || return 1
	cp "$src/bin/pinns" "$1/pinns"
}

build_etcd() { # OUT WORK
	local m=$2/etcd-wrapper v=v$ETCD_VERSION mod
	mkdir -p "$m"
	cat >"$m/main.go" <<-'EOF'
		// Command etcd is etcd's own server main, built from released modules.
		package main

		import (
			"os"

			"go.etcd.io/etcd/server/v3/etcdmain"
		)

		func main() { etcdmain.Main(os.Args) }
	EOF
	(
		cd "$m"
		"$GO" mod init etcd-wrapper 2>/dev/null || exit 1
		for mod in server api client/pkg client pkg; do
			"$GO" mod edit -require="go.etcd.io/etcd/$mod/v3@$v" || exit 1
		done
		"$GO" mod tidy &&
			"$GO" build -trimpath -ldflags '-s -w' -o "$1/etcd" .
	)
}

# The programs of the kubernetes component, built together (they share
# most packages, so the four beyond kube-apiserver cost about 3 CPU-minutes).
KUBE_CMDS="kube-apiserver kubelet kube-controller-manager kube-scheduler kube-proxy"

build_kubernetes() { # OUT WORK
	local src=$2/kubernetes v=$KUBERNETES_VERSION staging mods cmds=() c
	staging=v0.${v#1.}
	writable_copy "k8s.io/kubernetes@v$v" "$src" || return 1
	(
		cd "$src"
		# The module builds on its own: no workspace, no vendored copies,
		# and the released staging modules instead of ./staging.
		rm -rf go.work go.work.sum vendor staging
		mods=$(awk '$1 ~ /^k8s\.io\// && $2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' go.mod)
		[ -n "$mods" ] || exit 1
		for m in $mods; do
			"$GO" mod edit -dropreplace="$m" || exit 1
		done
		# every staging module go.mod requires (at v0.0.0) at the release
		for m in $(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' go.mod); do
			"$GO" mod edit -require="$m@$staging" || exit 1
		done
		for c in $KUBE_CMDS; do cmds+=("./cmd/$c"); done
		# -o names a directory: one binary per command, named for it.
		GOFLAGS="$GOFLAGS -mod=mod" "$GO" mod tidy >/dev/null &&
			GOFLAGS="$GOFLAGS -mod=mod" "$GO" build -trimpath \
				-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$v -X k8s.io/component-base/version.gitMajor=${v%%.*} -X k8s.io/component-base/version.gitMinor=$(echo "$v" | cut -d. -f2)" \
				-o "$1/" "${cmds[@]}"
	)
}

# component NAME: canonical name (containerd2 is containerd)
component() {
	case "$1" in
	containerd | containerd2) echo containerd ;;
	crio | etcd) echo "$1" ;;
	kubernetes | kube-apiserver | kubelet) echo kubernetes ;;
	*) return 1 ;;
	esac
}

# bindir NAME: <cache>/<name>-<version>/bin
bindir() {
	echo "$CACHE/$1-$(pinned "$1")/bin"
}

# ensure NAME: builds NAME unless its stamp is there. The build goes to a
# hidden sibling directory that replaces <name>-<version> only once it is
# complete, so binaries a running test uses stay in place until then.
ensure() {
	local name=$1 version dir part start work rc=0
	version=$(pinned "$name")
	dir=$CACHE/$name-$version
	if [ -f "$dir/.done" ]; then
		note "$name $version cached"
		return 0
	fi
	if ! mkdir -p "$CACHE" 2>/dev/null || [ ! -w "$CACHE" ]; then
		failed "$CACHE is not writable: cannot build $name $version (run as root or set E2E_COMPONENTS_DIR)"
		return 0
	fi
	start=$SECONDS
	part=$CACHE/.$name-$version.partial
	rm -rf "$part"
	mkdir -p "$part/bin"
	work=$(mktemp -d "${TMPDIR:-/tmp}/components-$name.XXXXXX")
	"build_${name//-/_}" "$part/bin" "$work" || rc=$?
	rm -rf "$work"
	if [ "$rc" -ne 0 ]; then
		rm -rf "$part"
		failed "$name $version: build failed"
		return 0
	fi
	rm -rf "$dir"
	mv "$part" "$dir"
	date -u +%FT%TZ >"$dir/.done"
	note "$name $version ready (built in $((SECONDS - start))s)"
}

usage() {
	echo "usage: $0 [all|containerd2|crio|etcd|kubernetes] ... | path NAME" >&2
	exit 2
}

[ $# -gt 0 ] || set -- all
if [ "$1" = path ]; then
	[ $# -eq 2 ] || usage
	name=$(component "$2") || usage
	bindir "$name"
	exit 0
fi
# One build at a time: two runs (make test, a developer by hand) never
# build the same component over each other.
if mkdir -p "$CACHE" 2>/dev/null && [ -w "$CACHE" ]; then
	exec 9>"$CACHE/.lock"
	flock 9
fi
for arg in "$@"; do
	if [ "$arg" = all ]; then
		for name in containerd crio etcd kubernetes; do ensure "$name"; done
		continue
	fi
	name=$(component "$arg") || usage
	ensure "$name"
done
