#!/usr/bin/env bash
# The end-to-end runtime matrix: the scenarios every container runtime must
# pass, run again on each runtime beyond the default (`make test` runs the
# whole e2e suite on Debian's containerd 1.6 first). One go test per
# runtime, summarised by testsummary; the exit status is non-zero when any
# runtime fails. Runtimes come from scripts/ci/components.sh's cache.
#
# Each runtime's go test -json output is kept in
# $E2E_MATRIX_OUT/e2e-<runtime>.json (default build/), and its FIGURE lines
# (create-to-IP, reclaim, restart recovery, seed node recovery) are printed
# after its summary.
#
# usage: scripts/ci/e2e-matrix.sh TESTSUMMARY GO [RUNTIME...]
#   (no runtime: containerd2 crio)
set -euo pipefail
summary=$1
go=$2
shift 2
runtimes=("$@")
[ ${#runtimes[@]} -gt 0 ] || runtimes=(containerd2 crio)

# The issue 26 matrix: 30 pods, a lost DEL reclaimed, the DEL queue
# replayed, the seed's prefix-delegation node at max pods 62, the full
# m5.large, a runtime restart with the chart's directory mount, churn with
# ipamd SIGKILLs; the agent finding the runtime by its endpoint probe; the
# runtime's own facts, what a stopped sandbox's IP says among them; and a
# stopped sandbox's released address leaked again, joining the pool again,
# and in an IPv6 node's /80 across a restart; and (issue 36) ipamd
# SIGKILLed during churn with DELs in flight, keeping every address's
# cooldown and every allocation (about 65 s); and (issue 39) multi-NIC
# pods beside regular ones on a 2-card node, a lost DEL reclaimed on both
# cards (about 50 s; both runtimes pass the pod annotations to the plugin).
tests='^(TestThirtyPods|TestLostDELReclaimedByReconciler|TestLostDELReplayedFromQueue|TestSeedPDNodeRecovers|TestFullM5LargeRecovers|TestContainerdRestartSocketDir|TestChurnWithIPAMDKills|TestAgentCRIClientReachesRuntime|TestAgentProbesTheRuntimeEndpoint|TestRuntimeSandboxLifecycle|TestStoppedSandboxIPs|TestStoppedSandboxAddressReused|TestIPv6RestartWithStoppedSandbox|TestIpamdKilledDuringChurnKeepsEveryPromise|TestMultiNICPodsBesideRegularOnes)$'

if [ "$(id -u)" -ne 0 ]; then
	echo "e2e-matrix: not root: the runtime matrix needs root and is not run"
	exit 0
fi
out=${E2E_MATRIX_OUT:-build}
mkdir -p "$out"
status=0
for rt in "${runtimes[@]}"; do
	echo "e2e-matrix: $rt"
	start=$SECONDS
	json="$out/e2e-$rt.json"
	# One test binary per runtime; 40 minutes is over 10x a quiet run.
	if ! E2E_RUNTIME=$rt "$go" test -count=1 -timeout 40m -json -run "$tests" ./test/e2e/ | tee "$json" | "$summary"; then
		status=1
	fi
	grep -o '"Output":"[^"]*FIGURE[^"]*' "$json" | sed -e 's/^"Output":"[[:space:]]*/  /' -e 's/\\n$//' -e 's/\\t/ /g' -e 's/\\u003e/>/g' || true
	echo "e2e-matrix: $rt done in $((SECONDS - start))s"
done
exit $status
