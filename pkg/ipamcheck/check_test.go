package ipamcheck_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamcheck"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// grace is the compressed grace period of these tests (production: 5m).
const grace = 3 * time.Second

// node is an m5.large: the EC2/IMDS simulator, a fake runtime serving
// CRI on a unix socket, and ipamd on both, serving its real gRPC socket
// and introspection.
type node struct {
	sim         *ec2sim.Sim
	aws         *awsutils.Client // ipamd's EC2/IMDS client
	rt          *fakecri.Runtime
	criEndpoint string
	sockDir     string // short: unix socket paths are limited to 107 bytes
	introspect  string // INTROSPECTION_BIND_ADDRESS
	agent       *ipamd.Agent
	stopAgent   func()
}

func newNode(t *testing.T) *node {
	t.Helper()
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"})
	ec2simtest.PointSDKAtSim(t, sim)
	dir, err := os.MkdirTemp("", "ipc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	n := &node{sim: sim, rt: fakecri.New(), sockDir: dir, criEndpoint: "unix://" + filepath.Join(dir, "cri.sock"), introspect: "unix:" + filepath.Join(dir, "i.sock")}
	require.NoError(t, n.rt.Serve(filepath.Join(dir, "cri.sock")))
	t.Cleanup(n.rt.Stop)
	// A real node always lists aws-node's own (host-network) sandbox.
	n.rt.Add(fakecri.Sandbox{ID: "aws-node-sandbox", Name: "aws-node-x", Namespace: "kube-system", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	return n
}

// start runs ipamd in mode on the node's checkpoint, with the reconciler's
// timings compressed (below the variables' floors, so set directly).
func (n *node) start(t *testing.T, mode podip.Mode, extraEnv ...string) {
	t.Helper()
	env := map[string]string{
		"ENABLE_IPv4": "true", "IP_COOLDOWN_PERIOD": "60", "POD_IP_RECONCILE_MODE": string(mode),
		"AWS_VPC_K8S_CNI_BACKING_STORE": filepath.Join(n.sockDir, "ipam.json"),
		"INTROSPECTION_BIND_ADDRESS":    n.introspect, "CRI_RUNTIME_ENDPOINT": n.criEndpoint,
	}
	for i := 0; i+1 < len(extraEnv); i += 2 {
		env[extraEnv[i]] = extraEnv[i+1]
	}
	cfg, err := ipamd.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	rc := &cfg.Reconciler
	rc.Grace, rc.Interval, rc.StartDelay = grace, 100*time.Millisecond, 10*time.Millisecond
	aws, err := awsutils.New(context.Background(), awsutils.Options{})
	require.NoError(t, err)
	n.aws = aws
	a, err := ipamd.NewAgent(context.Background(), ipamd.Options{Config: cfg, AWS: aws,
		MaxPodsFile: filepath.Join("..", "..", "misc", "eni-max-pods.txt"),
		SocketPath:  filepath.Join(n.sockDir, "ipamd.sock"), DelQueueDir: filepath.Join(n.sockDir, "delq"),
		MetricsAddress: "unix:" + filepath.Join(n.sockDir, "m.sock")})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	n.agent = a
	n.stopAgent = func() { cancel(); require.NoError(t, <-done); n.stopAgent = nil }
	t.Cleanup(func() {
		if n.stopAgent != nil {
			n.stopAgent()
		}
	})
	// Listening, not only bound: the socket file exists a moment before
	// connections are accepted.
	require.Eventually(t, func() bool {
		c, err := net.Dial("unix", strings.TrimPrefix(n.introspect, "unix:"))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
}

// pod makes a CNI ADD through ipamd's gRPC socket, as aws-cni does, for a
// sandbox the runtime lists unless hidden (its ADD still in flight). It
// returns the pod's address.
func (n *node) pod(t *testing.T, id, name string, hidden bool) string {
	t.Helper()
	n.rt.Add(fakecri.Sandbox{ID: id, Name: name, Namespace: "default", State: runtimeapi.PodSandboxState_SANDBOX_READY, Hidden: true})
	conn, err := grpc.NewClient("unix://"+filepath.Join(n.sockDir, "ipamd.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	var ip string
	// Addresses join the pool once checked against the runtime; retry
	// until the reconciler has checked them.
	require.Eventually(t, func() bool {
		r, err := rpc.NewCNIBackendClient(conn).AddNetwork(context.Background(), &rpc.AddNetworkRequest{ContainerID: id, IfName: "eth0",
			NetworkName: "aws-cni", K8S_POD_NAME: name, K8S_POD_NAMESPACE: "default", K8S_POD_INFRA_CONTAINER_ID: id, Netns: "/var/run/netns/x"})
		if err != nil || !r.Success || len(r.IPAllocationMetadata) == 0 {
			return false
		}
		ip = r.IPAllocationMetadata[0].IPv4Addr
		return true
	}, 10*time.Second, 20*time.Millisecond)
	if !hidden {
		n.rt.ShowWithIP(id, ip)
	}
	return ip
}

// sandboxID is a container ID of the runtime's shape (64 hex digits).
func sandboxID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

// check runs the command as `aws-k8s-agent ipam-check args...` would, with
// ipamd's defaults and env as the environment.
func check(env map[string]string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = ipamcheck.Main(args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &out, &errOut,
		ipamcheck.Defaults{IntrospectionAddr: ipamd.DefaultIntrospectionAddress, RuntimeCandidates: cri.DefaultSocketCandidates})
	return code, out.String(), errOut.String()
}

// row finds the table row of an address.
func row(t *testing.T, table, ip string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(ip) + ` .*$`).FindString(table)
	require.NotEmpty(t, m, "no row for %s in\n%s", ip, table)
	return m
}

// TestCheckAgainstIpamd is the rollout on one node: report mode first (a
// lost DEL shows as a leaked candidate, exit 1), then enforce (the
// address is reclaimed and cools down, exit 0); live pods and an ADD in
// flight are never called leaked.
func TestCheckAgainstIpamd(t *testing.T) {
	n := newNode(t)
	n.start(t, podip.Report)
	flags := []string{"-introspection-addr", n.introspect, "-runtime-endpoint", n.criEndpoint}

	web0ID, web1ID, lostID, startingID := sandboxID("web-0"), sandboxID("web-1"), sandboxID("job-1"), sandboxID("new-0")
	web0 := n.pod(t, web0ID, "web-0", false)
	web1 := n.pod(t, web1ID, "web-1", false)
	lost := n.pod(t, lostID, "job-1", false)
	n.rt.Remove(lostID) // the pod is gone; its CNI DEL never reached ipamd
	require.Eventually(t, func() bool {
		st, _ := n.agent.ReconcilerStatus()
		return len(st.Candidates) == 1 && st.Candidates[0].Confirmed
	}, 5*grace, 20*time.Millisecond, "the reconciler confirms the lost DEL")
	starting := n.pod(t, startingID, "new-0", true) // ADD returned, the runtime does not list it yet

	code, table, stderr := check(nil, flags...)
	t.Logf("report mode:\n%s", table)
	require.Equal(t, ipamcheck.ExitLeaks, code, stderr)
	assert.Regexp(t, `^ADDRESS +ENI +POD +CONTAINER +AGE +VERDICT\n`, table)
	assert.Regexp(t, `default/web-0 +`+web0ID[:13]+` +\d+s +live$`, row(t, table, web0))
	assert.Regexp(t, `default/web-1 +`+web1ID[:13]+` +\d+s +live$`, row(t, table, web1))
	assert.Regexp(t, `default/job-1 +`+lostID[:13]+` +\d+s +leaked candidate \(first seen absent at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, \d+ pass(es)?, confirmed\)$`, row(t, table, lost))
	assert.Regexp(t, `default/new-0 +`+startingID[:13]+` +\d+s +in flight \(younger than the 3s grace period\)$`, row(t, table, starting))
	assert.Regexp(t, `(?m)^\(\d+ addresses\) +eni-\w+ +- +- +- +unassigned \(-all lists them\)$`, table)
	assert.Regexp(t, `(?m)^\d+ addresses on \d ENIs?: 2 live, 1 in flight, 1 leaked candidate \(1 confirmed\), 0 cooling down, \d+ unassigned; reconciler report mode, grace 3s; 3 sandboxes on `+regexp.QuoteMeta(strings.TrimPrefix(n.criEndpoint, "unix://"))+`(; ENI subnets? .+)?\n$`, table)

	// The same through the environment ipamd reads, as JSON.
	code, out, stderr := check(map[string]string{"INTROSPECTION_BIND_ADDRESS": n.introspect, "CRI_RUNTIME_ENDPOINT": n.criEndpoint}, "-o", "json")
	require.Equal(t, ipamcheck.ExitLeaks, code, stderr)
	var rep ipamcheck.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	verdicts := map[string]ipamcheck.Verdict{}
	for _, a := range rep.Addresses {
		verdicts[a.ContainerID] = a.Verdict
		if a.ContainerID == lostID {
			assert.False(t, a.FirstSeenAbsent.IsZero())
			assert.True(t, a.Confirmed)
			assert.Equal(t, "default", a.PodNamespace)
			assert.Equal(t, "job-1", a.PodName)
		}
	}
	assert.Equal(t, ipamcheck.Live, verdicts[web0ID])
	assert.Equal(t, ipamcheck.LeakedCandidate, verdicts[lostID])
	assert.Equal(t, ipamcheck.InFlight, verdicts[startingID])
	assert.True(t, rep.LeaksFound)
	assert.Equal(t, "report", rep.Reconciler.Mode)
	assert.Equal(t, 1, rep.Summary.LeakedCandidates)
	assert.Equal(t, 1, rep.Summary.ConfirmedLeaks)
	assert.Equal(t, rep.Summary.Addresses, rep.Summary.Live+rep.Summary.InFlight+rep.Summary.LeakedCandidates+rep.Summary.InUse+rep.Summary.CoolingDown+rep.Summary.Unassigned)
	var keys map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &keys))
	for _, k := range []string{"checkedAt", "runtimeEndpoint", "sandboxes", "reconciler", "addresses", "unassignedByENI", "summary", "leaksFound"} {
		assert.Contains(t, keys, k)
	}

	// Enforce: the leaked address is reclaimed and cools down; the new pod
	// has started meanwhile.
	n.rt.ShowWithIP(startingID, starting)
	n.stopAgent()
	n.start(t, podip.Enforce)
	require.Eventually(t, func() bool { st, _ := n.agent.ReconcilerStatus(); return st.Totals.Reclaimed == 1 }, 5*grace, 20*time.Millisecond)
	code, table, stderr = check(nil, flags...)
	t.Logf("enforce mode:\n%s", table)
	require.Equal(t, ipamcheck.ExitClean, code, stderr)
	assert.Regexp(t, ` eni-\w+ +- +- +\d+s +cooling down \(free at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)$`, row(t, table, lost))
	assert.Regexp(t, `live$`, row(t, table, starting))
	assert.Regexp(t, `3 live, 0 in flight, 0 leaked candidates, 1 cooling down, .* reconciler enforce mode`, table)

	// -all lists every unassigned address instead of a count per ENI.
	code, all, _ := check(nil, append(flags, "-all")...)
	require.Equal(t, ipamcheck.ExitClean, code)
	assert.NotContains(t, all, "(-all lists them)")
	assert.Regexp(t, `(?m)^\d+\.\d+\.\d+\.\d+ +eni-\w+ +- +- +- +unassigned$`, all)
}

// TestCheckReportsIpamdsAnswer: past the grace period, whether an
// address this check's list leaves out is leaked or in use is ipamd's
// answer. A sandbox a partial list leaves out (it answers when asked by
// its ID) and one the runtime cannot describe are leaked candidates that
// are not confirmed, and an allocation of a gone sandbox whose address
// another sandbox uses is in use; none of them is a leak (exit 0), and
// each row says why ipamd keeps it.
func TestCheckReportsIpamdsAnswer(t *testing.T) {
	n := newNode(t)
	n.start(t, podip.Report)
	flags := []string{"-introspection-addr", n.introspect, "-runtime-endpoint", n.criEndpoint}

	webID, partialID, mutedID, staleID, userID := sandboxID("web-0"), sandboxID("web-1"), sandboxID("web-2"), sandboxID("job-1"), sandboxID("web-3")
	n.pod(t, webID, "web-0", false)
	partial := n.pod(t, partialID, "web-1", false)
	muted := n.pod(t, mutedID, "web-2", false)
	stale := n.pod(t, staleID, "job-1", true) // its sandbox never listed and gone: the runtime says NotFound
	allocated := time.Now()
	n.rt.OmitFromList(partialID, true) // a partial list: the sandbox answers when asked by its ID
	n.rt.OmitFromList(mutedID, true)
	n.rt.FailStatusOf(mutedID, codes.Unavailable) // and one it cannot describe
	// A running sandbox that uses the gone sandbox's address (as an
	// outdated checkpoint leaves it).
	n.rt.Add(fakecri.Sandbox{ID: userID, Name: "web-3", Namespace: "default", IP: stale, State: runtimeapi.PodSandboxState_SANDBOX_READY})
	require.Eventually(t, func() bool {
		st, _ := n.agent.ReconcilerStatus()
		return st.LastPass.Start.After(allocated.Add(grace)) && len(st.Candidates) == 2
	}, 10*grace, 20*time.Millisecond, "a pass past the grace period holds the stale allocation and the one it cannot describe")

	code, table, stderr := check(nil, flags...)
	t.Logf("ipamd's answer:\n%s", table)
	require.Equal(t, ipamcheck.ExitClean, code, stderr)
	assert.Regexp(t, `default/web-1 +`+partialID[:13]+` +\d+s +leaked candidate, not confirmed \(this check's list left its sandbox out; ipamd holds no candidate for it: .*\)$`, row(t, table, partial))
	assert.Regexp(t, `default/web-2 +`+mutedID[:13]+` +\d+s +leaked candidate, not confirmed \(first seen absent at .*; held because the runtime has not said whether its sandbox exists\)$`, row(t, table, muted))
	assert.Regexp(t, `default/job-1 +`+staleID[:13]+` +\d+s +in use by sandbox `+userID[:13]+`, not leaked: ipamd keeps the address for it \(held because sandbox `+userID+` \(pod default/web-3, ready true\) reports its address\)$`, row(t, table, stale))
	assert.Regexp(t, `(?m)^\d+ addresses on \d ENIs?: 1 live, 0 in flight, 2 leaked candidates \(0 confirmed\), 1 in use by another sandbox, 0 cooling down, \d+ unassigned;`, table)

	code, out, stderr := check(nil, append(flags, "-o", "json")...)
	require.Equal(t, ipamcheck.ExitClean, code, stderr)
	var rep ipamcheck.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	rows := map[string]ipamcheck.Row{}
	for _, a := range rep.Addresses {
		rows[a.ContainerID] = a
	}
	assert.Equal(t, ipamcheck.LeakedCandidate, rows[partialID].Verdict)
	assert.False(t, rows[partialID].Confirmed)
	assert.Empty(t, rows[partialID].HeldBecause, "ipamd holds no candidate for it")
	assert.Equal(t, ipamcheck.LeakedCandidate, rows[mutedID].Verdict)
	assert.False(t, rows[mutedID].Confirmed)
	assert.Equal(t, "the runtime has not said whether its sandbox exists", rows[mutedID].HeldBecause)
	assert.Equal(t, ipamcheck.InUse, rows[staleID].Verdict)
	assert.Equal(t, userID, rows[staleID].UsedBy)
	assert.NotEmpty(t, rows[staleID].HeldBecause)
	assert.Equal(t, 0, rep.Summary.ConfirmedLeaks)
	assert.Equal(t, 2, rep.Summary.LeakedCandidates)
	assert.Equal(t, 1, rep.Summary.InUse)
	assert.False(t, rep.LeaksFound)
}

// On a prefix-delegation node the free addresses of every /28 are one
// row per ENI, and the summary accounts for every address of the pool.
func TestCheckPrefixNode(t *testing.T) {
	n := newNode(t)
	n.start(t, podip.Enforce, "ENABLE_PREFIX_DELEGATION", "true")
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		n.pod(t, sandboxID(name), name, false)
	}
	// The pool manager may still be adding prefixes or the warm ENI:
	// compare with the pool only when it did not change during a check.
	var rep ipamcheck.Report
	var table string
	require.Eventually(t, func() bool {
		before := n.agent.Store().Stats().TotalIPs
		code, out, stderr := check(nil, "-introspection-addr", n.introspect, "-runtime-endpoint", n.criEndpoint, "-o", "json")
		require.Equal(t, ipamcheck.ExitClean, code, stderr)
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		code, table, stderr = check(nil, "-introspection-addr", n.introspect, "-runtime-endpoint", n.criEndpoint)
		require.Equal(t, ipamcheck.ExitClean, code, stderr)
		return n.agent.Store().Stats().TotalIPs == before && rep.Summary.Addresses == before
	}, 10*time.Second, 50*time.Millisecond, "every address of the pool, once")
	t.Logf("prefix node:\n%s", table)
	assert.Equal(t, 3, rep.Summary.Live)
	assert.Len(t, rep.Addresses, 3)
	assert.Equal(t, 0, rep.Summary.Addresses%16, "whole /28 prefixes")
	perENI := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^\(\d+ addresses\) +(eni-\w+) `).FindAllStringSubmatch(table, -1) {
		perENI[m[1]]++
	}
	require.NotEmpty(t, perENI)
	for eni, rows := range perENI {
		assert.Equal(t, 1, rows, "one row of unassigned addresses for %s", eni)
	}
}

// A runtime or an ipamd that cannot be reached is exit 2, with a message
// naming what was unreachable and what sets where to look.
func TestCheckUnreachable(t *testing.T) {
	n := newNode(t)
	n.start(t, podip.Off)
	code, _, stderr := check(nil, "-introspection-addr", n.introspect, "-runtime-endpoint", n.criEndpoint)
	assert.Equal(t, ipamcheck.ExitCannotCheck, code)
	assert.Contains(t, stderr, "POD_IP_RECONCILE_MODE=off", "with the reconciler off there is nothing to compare with")
	n.stopAgent()

	n.start(t, podip.Report)
	missing := "unix://" + filepath.Join(n.sockDir, "no-runtime.sock")
	var out string
	code, out, stderr = check(nil, "-introspection-addr", n.introspect, "-runtime-endpoint", missing)
	assert.Equal(t, ipamcheck.ExitCannotCheck, code)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "container runtime unreachable (at "+missing+")")
	assert.Contains(t, stderr, "-runtime-endpoint or CRI_RUNTIME_ENDPOINT")

	// An empty sandbox list while addresses are allocated is not trusted,
	// as the reconciler skips such a pass.
	n.pod(t, sandboxID("web-0"), "web-0", false)
	n.rt.SetEmpty(true)
	code, out, stderr = check(nil, "-introspection-addr", n.introspect, "-runtime-endpoint", n.criEndpoint)
	assert.Equal(t, ipamcheck.ExitCannotCheck, code)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "listed no pod sandbox at all while ipamd holds 1 allocation;")
	n.rt.SetEmpty(false)

	// The runtime answers but fails every call.
	n.rt.SetError(14) // Unavailable
	code, _, stderr = check(nil, "-introspection-addr", n.introspect, "-runtime-endpoint", n.criEndpoint, "-timeout", "2s")
	assert.Equal(t, ipamcheck.ExitCannotCheck, code)
	assert.Contains(t, stderr, "container runtime unreachable")
	n.rt.SetError(0)

	n.stopAgent()
	code, _, stderr = check(map[string]string{"DISABLE_INTROSPECTION": "true"}, "-introspection-addr", n.introspect, "-runtime-endpoint", n.criEndpoint)
	assert.Equal(t, ipamcheck.ExitCannotCheck, code)
	assert.Contains(t, stderr, "ipamd's introspection unreachable at "+n.introspect)
	assert.Contains(t, stderr, "-introspection-addr or INTROSPECTION_BIND_ADDRESS")
	assert.Contains(t, stderr, "DISABLE_INTROSPECTION=true")
	_, _, stderr = check(map[string]string{"DISABLE_INTROSPECTION": "1"}, "-introspection-addr", n.introspect, "-runtime-endpoint", n.criEndpoint)
	assert.Contains(t, stderr, "DISABLE_INTROSPECTION=1 is set", "parsed as ipamd parses it")

	code, _, stderr = check(nil, "-o", "yaml")
	assert.Equal(t, ipamcheck.ExitCannotCheck, code)
	assert.Contains(t, stderr, `-o "yaml"`)
}

// The summary names the subnet of the node's ENIs with the free count of
// the last DescribeSubnets answer ipamd's client received, and -o json
// carries it under "subnets".
func TestCheckNamesENISubnets(t *testing.T) {
	ctx := context.Background()
	n := newNode(t)
	n.start(t, podip.Report, "WARM_POOL_START_SPREAD", "0s") // the warm ENI at once
	n.pod(t, sandboxID("web-0"), "web-0", false)
	// The warm ENI: its subnet choice is the answer that gives the figure.
	require.Eventually(t, func() bool { return len(n.agent.Store().ENISummaries()) == 2 }, 30*time.Second, 20*time.Millisecond)
	subnet := n.agent.Store().ENISummaries()[0].Info.SubnetID
	raw := ec2.NewFromConfig(aws.Config{Region: n.sim.Region(), Credentials: aws.AnonymousCredentials{}}, func(o *ec2.Options) {
		o.BaseEndpoint = aws.String(n.sim.EC2Endpoint())
	})
	flags := []string{"-introspection-addr", n.introspect, "-runtime-endpoint", n.criEndpoint}

	var free int
	var table string
	require.Eventually(t, func() bool {
		// A fresh answer to ipamd's own client (as its tag re-check gets),
		// then the simulator's count: equal unless the pool moved between.
		if _, err := n.aws.ExcludedSubnets(ctx, []string{subnet}); err != nil {
			return false
		}
		out, err := raw.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnet}})
		if err != nil || len(out.Subnets) != 1 {
			return false
		}
		free = int(aws.ToInt32(out.Subnets[0].AvailableIpAddressCount))
		var code int
		code, table, _ = check(nil, flags...)
		return code == ipamcheck.ExitClean && strings.Contains(table, fmt.Sprintf("; ENI subnet %s %d free (", subnet, free))
	}, 10*time.Second, 50*time.Millisecond, "the summary names %s with the simulator's count", subnet)
	t.Logf("summary with the subnet:\n%s", table)
	assert.Regexp(t, `(?m)^\d+ addresses on 2 ENIs: .*; ENI subnet `+subnet+` \d+ free \(\d+s ago\)$`, table)

	code, out, stderr := check(nil, append(flags, "-o", "json")...)
	require.Equal(t, ipamcheck.ExitClean, code, stderr)
	var rep ipamcheck.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Subnets, 1)
	s := rep.Subnets[0]
	assert.Equal(t, subnet, s.ID)
	assert.True(t, s.Answered)
	assert.True(t, s.Candidate, "the only subnet: the primary one, where new ENIs go")
	assert.Len(t, s.ENIs, 2)
	assert.NotEmpty(t, s.CIDR)
	assert.False(t, s.AsOf.IsZero())
}
