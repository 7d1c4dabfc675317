#!/usr/bin/env bash
# Builds upstream's aws-cni (github.com/aws/amazon-vpc-cni-k8s at
# UPSTREAM_VERSION, default v1.23.1) as upstream ships it (CGO off, PIE,
# -s -w) into OUT (default build/upstream/aws-cni), from the Go module
# proxy. Only for side-by-side benchmarks (make bench-report's plugin
# ratio row): nothing of upstream's source enters this repository.
set -euo pipefail
GO=${GO:-go}
version=${UPSTREAM_VERSION:-v1.23.1}
out=${OUT:-build/upstream/aws-cni}
module=github.com/aws/amazon-vpc-cni-k8s

dir=$(mktemp -d)
trap 'chmod -R u+w "$dir"; rm -rf "$dir"' EXIT
# A throwaway module, so this repository's go.mod is not touched.
(cd "$dir" && "$GO" mod init upstream-fetch >/dev/null 2>&1)
src=$(cd "$dir" && GOFLAGS=-mod=mod "$GO" mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ ! -d "$src" ]; then
	echo "could not download $module@$version from the Go module proxy" >&2
	exit 1
fi
cp -r "$src" "$dir/src"
chmod -R u+w "$dir/src"
mkdir -p "$(dirname "$out")"
abs_out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
(cd "$dir/src" && CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" build -buildmode=pie -ldflags '-s -w' -o "$abs_out" ./cmd/routed-eni-cni-plugin)
echo "built $module@$version's aws-cni: $out"
