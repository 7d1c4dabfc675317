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
#   vmkernel         a Debian kernel with 802.1Q VLAN and a base initramfs
#                    for the VM harness (test/vmkernel, QEMU under TCG):
#                    bin/vmlinuz, bin/base.cpio.gz, bin/release and the
#                    recipe (scripts/ci/vmkernel/{init,modules}); apt
#                    (root): qemu-system-x86. Details above build_vmkernel.
#
# usage: scripts/ci/components.sh [all|containerd2|crio|etcd|kubernetes|vmkernel]
#        scripts/ci/components.sh path NAME     (prints NAME's bin directory)
# (containerd2 and containerd name the same component; kube-apiserver and
# kubelet name kubernetes.) One line per
# component: "components: NAME VERSION ready (built in Ns)" or "... cached".
# First run on 2 cores: about 12 minutes in all, 610 MB (docs/testing.md);
# vmkernel adds 15-25 s and 21 MB (with qemu-system-x86 missing, apt adds
# about 22 s and 81 MB installed).
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
VMKERNEL_VERSION=$(pinned vmkernel)

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

# vmkernel: the VM harness's kernel and base initramfs (test/vmkernel boots
# them under QEMU's TCG; docs/testing.md, "A kernel with VLAN links in a
# VM").
#
# Pinning. Debian's archive carries only the current ABI of its kernel
# (linux-image-6.1.0-NN-cloud-amd64) and drops the previous one when the
# ABI moves, so an exact pin breaks on a fresh machine. versions.txt names
# instead SERIES-FLAVOUR.REVISION, e.g. 6.1-cloud.1: the build resolves the
# meta package linux-image-FLAVOUR-amd64 to its current ABI, refuses one
# outside SERIES, and records the ABI and package versions it used in
# bin/release. REVISION counts changes to the recipe's files,
# scripts/ci/vmkernel/{init,modules}: the build keeps copies in bin/, and
# test/vmkernel fails when they differ from the repository's, asking for a
# new revision. When the resolved ABI cannot be downloaded (stale apt
# lists) it runs apt-get update once, as root, and resolves again.
#
# Nothing is installed but qemu-system-x86 (apt, root, when
# qemu-system-x86_64 is missing): the kernel and busybox-static are
# downloaded and extracted (dpkg -x). The initramfs holds busybox (its
# links made at boot), the modules scripts/ci/vmkernel/modules lists with a
# busybox depmod, the host's ip, nft, xtables-nft-multi and
# xtables-legacy-multi (with the iptables names, the xtables extensions,
# every ldd library and the loader), and scripts/ci/vmkernel/init as
# /init. It is gzip'd and zero-padded to a multiple of 4 bytes, so an
# uncompressed cpio can be appended to it.
#
# Cold cost, measured 2026-12-06 on 2 cores: 15 s at load 1.5, 25 s at
# load 10 (downloads 27 MB of .debs, mostly the kernel); 21 MB cached
# (vmlinuz 14 MB, base.cpio.gz 7.7 MB). qemu-system-x86 when missing:
# about 22 s, 81 MB installed.
VMKERNEL_APT="qemu-system-x86_64 qemu-system-x86"
VMKERNEL_TOOLS="ip nft xtables-nft-multi xtables-legacy-multi"

# vmkernel_abi FLAVOUR: the ABI the meta package depends on now, e.g.
# 6.1.0-57-cloud-amd64
vmkernel_abi() {
	apt-cache depends "linux-image-$1-amd64" 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { sub(/^linux-image-/, "", $2); print $2; exit }'
}

# vmkernel_download SERIES FLAVOUR DIR: downloads the kernel and
# busybox-static .debs into DIR, prints the ABI.
vmkernel_download() {
	local series=$1 flavour=$2 dir=$3 abi try
	for try in 1 2; do
		abi=$(vmkernel_abi "$flavour")
		case "$abi" in
		"$series".*-"$flavour"-amd64)
			# apt-get download, as root, fetches as the user _apt: DIR
			# must be its to write (else a warning and an unsandboxed fetch)
			chmod 755 "$(dirname "$dir")"
			[ "$(id -u)" -ne 0 ] || ! id _apt >/dev/null 2>&1 || chown _apt "$dir"
			if (cd "$dir" && apt-get download -qq "linux-image-$abi" busybox-static) >&2; then
				echo "$abi"
				return 0
			fi
			;;
		*) note "vmkernel: linux-image-$flavour-amd64 resolves to '${abi:-nothing}', not a $series kernel" ;;
		esac
		[ "$try" = 1 ] && [ "$(id -u)" -eq 0 ] || break
		note "vmkernel: apt-get update, then resolving again"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || break
	done
	return 1
}

# vmkernel_libs ROOT FILE: copies every library ldd lists for FILE, and
# the loader, to the same path under ROOT (merged /usr, like the host).
vmkernel_libs() {
	local lib
	for lib in $(ldd "$2" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
		[ -e "$1$lib" ] && continue
		mkdir -p "$1$(dirname "$lib")"
		cp -L "$lib" "$1$lib" || return 1
	done
}

build_vmkernel() { # OUT WORK
	local out=$1 work=$2 series flavour abi kdir mods root m t p xt
	# 6.1-cloud.1: series 6.1, flavour cloud, recipe revision 1
	series=${VMKERNEL_VERSION%%-*}
	flavour=${VMKERNEL_VERSION#*-}
	flavour=${flavour%.*}
	apt_need "$VMKERNEL_APT" || return 1
	mkdir -p "$work/debs"
	abi=$(vmkernel_download "$series" "$flavour" "$work/debs") || return 1
	for p in "$work"/debs/*.deb; do dpkg -x "$p" "$work/x" || return 1; done
	cp "$work/x/boot/vmlinuz-$abi" "$out/vmlinuz" || return 1
	kdir=$(find "$work/x" -type d -path "*/modules/$abi" | head -n 1)
	[ -n "$kdir" ] || {
		note "vmkernel: no modules directory for $abi in the package"
		return 1
	}

	root=$work/root
	mkdir -p "$root"/usr/{bin,sbin,lib,lib64} "$root"/{proc,sys,dev,run,tmp,etc,root}
	for p in bin sbin lib lib64; do ln -s "usr/$p" "$root/$p"; done
	mkdir -p "$root/var" && ln -s ../run "$root/var/run"
	cp "$work/x/bin/busybox" "$root/usr/bin/busybox" || return 1
	cp "$ROOT/scripts/ci/vmkernel/init" "$root/init" || return 1
	chmod 755 "$root/init"
	mods=$root/usr/lib/modules/$abi
	for m in $(grep -v '^#' "$ROOT/scripts/ci/vmkernel/modules"); do
		[ -e "$kdir/$m" ] || continue
		mkdir -p "$mods/$(dirname "$m")"
		cp -r "$kdir/$m" "$mods/$(dirname "$m")/"
	done
	"$root/usr/bin/busybox" depmod -b "$root" "$abi" || return 1

	for t in $VMKERNEL_TOOLS; do
		p=$(command -v "$t") || {
			note "vmkernel: no $t on this host (apt: iproute2, nftables, iptables)"
			return 1
		}
		p=$(readlink -f "$p")
		cp "$p" "$root/usr/sbin/$t" && vmkernel_libs "$root" "$p" || return 1
	done
	for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
		ln -s xtables-nft-multi "$root/usr/sbin/$t"
		ln -s xtables-nft-multi "$root/usr/sbin/${t/tables/tables-nft}"
		ln -s xtables-legacy-multi "$root/usr/sbin/${t/tables/tables-legacy}"
	done
	# the iptables extensions are dlopen'd: ldd does not see them
	xt=$(dirname "$(ldd "$(command -v xtables-nft-multi)" | awk '$1 ~ /^libxtables/ { print $3 }')")/xtables
	if [ -d "$xt" ]; then
		mkdir -p "$root$xt"
		cp -L "$xt"/*.so "$root$xt/"
		for p in "$xt"/*.so; do vmkernel_libs "$root" "$p" || return 1; done
	fi
	for p in /etc/protocols /etc/services /etc/ethertypes /etc/iproute2; do
		[ -e "$p" ] && cp -rL "$p" "$root/etc/"
	done
	printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"

	(cd "$root" && find . | LC_ALL=C sort | "$root/usr/bin/busybox" cpio -o -H newc 2>/dev/null) |
		gzip -9 >"$out/base.cpio.gz" || return 1
	truncate -s %4 "$out/base.cpio.gz"
	cp "$ROOT/scripts/ci/vmkernel/init" "$ROOT/scripts/ci/vmkernel/modules" "$out/"
	{
		echo "abi $abi"
		dpkg-deb -f "$work/debs/linux-image-${abi}"_*.deb Package Version | paste -sd' '
		dpkg-deb -f "$work/debs"/busybox-static_*.deb Package Version | paste -sd' '
		echo "host tools: $(ip -V) / $(nft -v) / $(xtables-nft-multi iptables -V)"
	} >"$out/release"
}

# component NAME: canonical name (containerd2 is containerd)
component() {
	case "$1" in
	containerd | containerd2) echo containerd ;;
	crio | etcd | vmkernel) echo "$1" ;;
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
	echo "usage: $0 [all|containerd2|crio|etcd|kubernetes|vmkernel] ... | path NAME" >&2
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
		for name in containerd crio etcd kubernetes vmkernel; do ensure "$name"; done
		continue
	fi
	name=$(component "$arg") || usage
	ensure "$name"
done
