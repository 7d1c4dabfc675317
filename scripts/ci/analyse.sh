#!/usr/bin/env bash
# The analysers of `make check` after gofmt and go vet:
#
#   staticcheck  fails on any finding except those whose message is listed
#                in scripts/ci/staticcheck.baseline (known findings in code
#                being moved; a fixed one is reported as stale so it can go).
#   deadcode     (-test: test binaries count as roots) prints unreachable
#                functions and never fails: test-only helpers and flags can
#                look dead.
#
# usage: scripts/ci/analyse.sh TOOLS_BIN [packages...]   (default ./...)
set -uo pipefail
cd "$(dirname "$0")/../.."

bin=$1
shift
[ $# -gt 0 ] || set -- ./...
baseline=scripts/ci/staticcheck.baseline

echo "staticcheck $*"
out=$("$bin/staticcheck" "$@" 2>&1)
rc=$?
# A finding is "path:line:col: message"; lines starting with a tab belong
# to the finding above them. Accepted: a message listed in the baseline.
# awk exits 1 when a finding is left.
awk -v baseline="$baseline" '
	BEGIN {
		while ((getline l < baseline) > 0) {
			sub(/[ \t]+$/, "", l)
			if (l == "" || l ~ /^#/) continue
			known[l] = 1
		}
	}
	/^\t/ { if (!skip) print; next }
	NF {
		msg = $0
		sub(/^[^ ]*:[0-9]+:[0-9]+: /, "", msg)
		skip = (msg in known)
		if (skip) { used[msg] = 1; nknown++ } else { print; nnew++ }
	}
	END {
		for (m in known) if (!(m in used)) printf "staticcheck: stale entry in %s (no longer found; remove it): %s\n", baseline, m
		if (nknown) printf "staticcheck: %d known finding(s) accepted by %s\n", nknown, baseline
		if (nnew) { printf "staticcheck: %d finding(s)\n", nnew; exit 1 }
	}' <<<"$out"
status=$?
if [ $status -eq 0 ] && [ $rc -ne 0 ] && [ -z "$out" ]; then
	echo "staticcheck: failed without output (exit $rc)"
	status=1
fi

echo "deadcode -test $* (report only)"
"$bin/deadcode" -test "$@" 2>&1 | sed 's/^/deadcode: /' || true

exit $status
