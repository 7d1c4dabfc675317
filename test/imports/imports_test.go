// Package imports holds the import rules of the module as a test: each
// package's doc comment says what it must never import, and this test
// fails, naming the importer, the forbidden import and the reason, as soon
// as one of those promises is broken. It reads the import graph with
// `go list -deps -json ./...` and builds nothing.
package imports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const mod = "github.com/aws/amazon-vpc-cni-k8s/"

// Where a rule looks. Test files are exempt unless the rule says tests.
type scope int

const (
	direct     scope = iota // the package's own non-test imports
	transitive              // everything its non-test code links
)

// rule is one promise a package's doc comment makes. Patterns are import
// paths, module-relative when they start with "./" and ending in "/..." for
// a package and everything below it.
type rule struct {
	pkgs   []string // the packages the rule binds
	except []string // packages among pkgs it does not bind
	scope  scope
	tests  bool // also the test files' direct imports

	forbid  []string // these may not be imported...
	unless  []string // ...except these
	allowed []string // when set, nothing else may be imported (direct only)

	reason string
}

// The clients ipamd uses to reach the world; they know nothing of ipamd.
var clients = []string{"./pkg/awsutils/...", "./pkg/cri/...", "./pkg/k8sapi/...", "./pkg/networkutils/...", "./pkg/delqueue/...", "./pkg/eniconfig/..."}

// The agent's jobs and the parts it builds them from; the agent wires them
// together, so none imports another.
var jobs = []string{"./pkg/ipamd/pool/...", "./pkg/ipamd/podip/...", "./pkg/ipamd/rpcserver/...", "./pkg/ipamd/enisweep/...",
	"./pkg/ipamd/imdsrefresh/...", "./pkg/ipamd/introspect/...", "./pkg/ipamd/httpserve/...",
	"./pkg/ipamd/hostnet/...", "./pkg/ipamd/poolgauges/..."}

// The agent and its jobs, without the leaves (datastore, warmpool).
var agentAndJobs = concat([]string{"./pkg/ipamd"}, jobs)

// Outside libraries that do I/O against the cloud, the cluster or a peer.
var cloudClusterRPC = []string{"github.com/aws/aws-sdk-go-v2/...", "github.com/aws/smithy-go/...", "k8s.io/...", "sigs.k8s.io/...", "google.golang.org/grpc/..."}

var rules = []rule{
	{
		pkgs: []string{"./pkg/ipamd/datastore/..."}, scope: transitive, tests: true,
		forbid: concat([]string{"./pkg/ipamd/...", "./pkg/sim/...", "github.com/prometheus/..."}, cloudClusterRPC),
		// Its external tests may build a synthetic pool; its tests read and
		// write upstream's checkpoint schema, a leaf of its own.
		unless: []string{"./pkg/sim/devpool", "./pkg/ipamd/datastore/upstreamschema"},
		reason: "the datastore is a leaf that owns the node's addresses; its only I/O is the Checkpointer it is given, " +
			"so it never reaches the agent, its siblings, EC2, Kubernetes or gRPC (nor do its tests, which use a fake checkpointer)",
	},
	{
		pkgs: []string{"./pkg/ipamd/warmpool/..."}, scope: direct,
		allowed: []string{"cmp", "errors", "fmt", "math", "math/bits", "slices", "sort", "strconv", "strings"},
		reason:  "warmpool is pure sizing math: no I/O, no clocks, no globals, no logging",
	},
	{
		pkgs: jobs, scope: transitive,
		forbid: agentAndJobs,
		reason: "the agent (pkg/ipamd) wires its jobs together through interfaces and callbacks; " +
			"a job importing the agent or another job would undo the split and make a cycle",
	},
	{
		pkgs: []string{"./pkg/ipamd/nodeinit/..."}, scope: transitive,
		forbid: agentAndJobs, unless: []string{"./pkg/ipamd/pool/..."},
		reason: "node init fills the datastore with the ENIs the pool manager's ownership rules (pool.IsManaged) call ipamd's, and the agent " +
			"sizes the pool manager from what it returns; it never reaches the agent or another job",
	},
	{
		pkgs: []string{"./pkg/ipamd/addfail"}, scope: direct,
		allowed: []string{"errors", "fmt", "strings", "time"},
		reason:  "addfail is a pure decision: it names and words the cause from the State its caller gathered, with no I/O and no logging",
	},
	{
		// Direct: pool and podip link the clients they use.
		pkgs: []string{"./pkg/ipamd/addfailsource/..."}, scope: direct,
		forbid: concat(agentAndJobs, clients, cloudClusterRPC),
		unless: []string{"./pkg/ipamd/pool", "./pkg/ipamd/podip"},
		reason: "the ADD-failure gatherer reads the datastore, the pool manager's growth status and the reconciler's outlook through " +
			"interfaces of its own (it imports pool and podip for their status types only); it never calls EC2, the runtime or the " +
			"API server, and never reaches the agent or another job",
	},
	{
		pkgs: []string{"./pkg/ipamd/restore/..."}, scope: direct,
		forbid: concat(agentAndJobs, clients, cloudClusterRPC),
		unless: []string{"./pkg/ipamd/podip"},
		reason: "the restore decides a start from the checkpoint and the node's ENIs in the datastore, and acts only through the pod-IP " +
			"reconciler (podip); it never calls EC2 or the API server and never reaches the agent or another job",
	},
	{
		pkgs: []string{"./pkg/ipamd/config/..."}, scope: direct,
		forbid: concat(agentAndJobs, []string{"./pkg/ipamd/nodeinit/...", "./pkg/cri/...", "./pkg/k8sapi/...", "./pkg/delqueue/..."}, cloudClusterRPC),
		unless: []string{"./pkg/ipamd/podip"},
		reason: "config only reads the environment: it imports the settings types of the clients it configures and podip's own " +
			"settings, never a job, the agent, or a client that reaches the runtime or the cluster",
	},
	{
		pkgs: []string{"./pkg/ipamd/rpcserver/..."}, scope: transitive,
		forbid: concat(clients, []string{"github.com/aws/aws-sdk-go-v2/...", "k8s.io/client-go/..."}),
		reason: "rpcserver holds no state of its own and reaches the node only through the funcs and interfaces in Options",
	},
	{
		pkgs: []string{"./pkg/ipamd/podip/..."}, scope: transitive,
		forbid: []string{"./pkg/awsutils/...", "./pkg/k8sapi/...", "./pkg/networkutils/...", "github.com/aws/aws-sdk-go-v2/...", "k8s.io/client-go/..."},
		reason: "podip compares the datastore with the container runtime only (pkg/cri, the DEL queue); " +
			"EC2 belongs to the pool manager and events go through an interface",
	},
	{
		pkgs: []string{"./pkg/ipamcheck/..."}, scope: transitive,
		forbid: concat([]string{"./pkg/ipamd", "./pkg/ipamd/pool/...", "./pkg/ipamd/rpcserver/...", "./pkg/ipamd/enisweep/...",
			"./pkg/sim/...", "./pkg/awsutils/...", "./pkg/k8sapi/...", "./pkg/networkutils/..."}, []string{"github.com/aws/aws-sdk-go-v2/...", "k8s.io/client-go/..."}),
		reason: "ipam-check reads a running ipamd over its introspection HTTP and the runtime over CRI; it links the types podip and the datastore serve, " +
			"never the agent, EC2 or the API server",
	},
	{
		pkgs: clients, scope: transitive,
		forbid: []string{"./pkg/ipamd/..."},
		reason: "clients reach one outside system each and are used by ipamd, never the other way round",
	},
	{
		pkgs: []string{"./cmd/routed-eni-cni-plugin/..."}, scope: transitive,
		forbid: concat([]string{"./pkg/ipamd/...", "./pkg/sim/...", "./pkg/awsutils/...", "./pkg/cri/...", "./pkg/k8sapi/...", "./pkg/networkutils/...", "./rpc/..."},
			[]string{"github.com/aws/aws-sdk-go-v2/...", "k8s.io/client-go/...", "google.golang.org/grpc/...",
				"google.golang.org/protobuf/..."}),
		reason: "the plugin is a separate binary the runtime execs per pod: it talks to ipamd only over the gRPC socket " +
			"(its own client, ipamdwire: linking grpc-go and the protobuf runtime cost every exec about 2 ms of start-up) " +
			"and the DEL queue files (pkg/delqueue), and stays small and quick to start",
	},
	{
		pkgs: []string{"./pkg/hostlock/...", "./pkg/podrules/..."}, scope: transitive,
		forbid: concat([]string{"./pkg/ipamd/...", "./pkg/sim/...", "./pkg/awsutils/...", "./pkg/cri/...", "./pkg/k8sapi/...", "./pkg/networkutils/...",
			"./pkg/delqueue/...", "./rpc/...", "github.com/prometheus/..."}, cloudClusterRPC),
		reason: "the address locks and the per-pod rules are shared by the plugin and ipamd: leaves on the standard library, x/sys and " +
			"netlink, so the plugin links them without ipamd's clients or metrics",
	},
	{
		pkgs: []string{"./cmd/egress-cni-plugin/..."}, scope: transitive,
		forbid: concat([]string{"./pkg/ipamd/...", "./pkg/sim/...", "./pkg/awsutils/...", "./pkg/cri/...", "./pkg/k8sapi/...", "./pkg/networkutils/...", "./rpc/..."},
			[]string{"github.com/aws/aws-sdk-go-v2/...", "k8s.io/client-go/..."}),
		reason: "egress-cni is chained after aws-cni and needs nothing of ipamd: host-local gives its address, iptables its SNAT",
	},
	{
		pkgs: []string{"./cmd/aws-vpc-cni/...", "./cmd/aws-vpc-cni-init/...", "./cmd/grpc-health-probe/..."}, scope: transitive,
		forbid: []string{"./pkg/ipamd/...", "./pkg/sim/..."},
		reason: "the entrypoint, the init container and the health probe run beside ipamd (a child process, a gRPC health check), never link it",
	},
	{
		pkgs: []string{"./pkg/...", "./cmd/...", "./rpc/..."}, scope: direct,
		except: []string{"./pkg/sim/...", "./cmd/tools/...", "./pkg/ipamd/internal/testsupport", "./pkg/ipamd", "./cmd/aws-k8s-agent"},
		forbid: []string{"./pkg/sim/..."},
		reason: "simulators are for tests and cmd/tools; production code never links them",
	},
	{
		pkgs: []string{"./pkg/ipamd", "./cmd/aws-k8s-agent"}, scope: direct,
		forbid: []string{"./pkg/sim/..."}, unless: []string{"./pkg/sim/devpool"},
		reason: "the agent links one simulator only, the synthetic development pool behind -dev-static-pool",
	},
	{
		pkgs: []string{"./pkg/sim/..."}, except: []string{"./pkg/sim/devpool"}, scope: transitive,
		forbid: []string{"./pkg/ipamd/..."},
		reason: "ec2sim, fakecri and churn fake the world around ipamd and meet it only on the wire (EC2/IMDS over HTTP, CRI, the rpc API); " +
			"ipamd's tests use them, so they never import ipamd's packages",
	},
	{
		pkgs: []string{"./pkg/sim/devpool"}, scope: transitive,
		forbid: agentAndJobs,
		reason: "devpool fills a datastore and the agent imports it: it may build on the datastore, never on the agent or its jobs",
	},
	{
		pkgs: []string{"./cmd/tools/build-image/...", "./cmd/tools/ec2-simulator/..."}, scope: transitive,
		forbid: []string{"./pkg/ipamd/..."},
		reason: "build-image packages binaries already built and ec2-simulator serves the EC2 simulator alone; neither links the agent",
	},
	{
		pkgs: []string{"./..."}, except: []string{"./pkg/ipamd/internal/testsupport", "./pkg/utils/clocktest", "./pkg/sim/ec2sim/ec2simtest", "./pkg/ipamd/datastore/upstreamschema"}, scope: direct,
		forbid: []string{"./pkg/ipamd/internal/testsupport", "./pkg/utils/clocktest", "./pkg/sim/ec2sim/ec2simtest", "./pkg/ipamd/datastore/upstreamschema"},
		reason: "testsupport (fake runtime, testify), clocktest (the manual clock), ec2simtest (simulator start-up) and upstreamschema (upstream's checkpoint document) are for test files only",
	},
	{
		pkgs: []string{"./pkg/utils/...", "./pkg/version/...", "./pkg/vpc/..."}, scope: transitive,
		forbid: []string{"./..."}, unless: []string{"./pkg/utils/..."},
		reason: "utilities, version strings and the static instance limits are leaves everything may use; they import nothing else of this module",
	},
	{
		pkgs: []string{"./pkg/...", "./rpc/..."}, scope: transitive,
		forbid: []string{"./cmd/..."},
		reason: "libraries never depend on a binary's packages",
	},
}

// pkg is what go list says about one package.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	DepOnly      bool
	Error        *struct{ Err string }
}

func TestImportRules(t *testing.T) {
	pkgs := loadPackages(t)
	for _, v := range check(rules, pkgs) {
		t.Error(v)
	}
}

// TestEveryRuleBindsAPackage keeps a rename from silently turning a rule off.
func TestEveryRuleBindsAPackage(t *testing.T) {
	pkgs := loadPackages(t)
	for i, r := range rules {
		n := 0
		for _, p := range pkgs {
			if !p.DepOnly && r.binds(p.ImportPath) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("rule %d (%v) binds no package of the module: %s", i, r.pkgs, r.reason)
		}
	}
}

// TestRulesCatchViolations runs the checker on a made-up graph, so a bug in
// the checker cannot pass for a clean tree.
func TestRulesCatchViolations(t *testing.T) {
	m := func(s string) string { return mod + s }
	graph := map[string]*pkg{
		m("pkg/ipamd"):                      {Imports: []string{m("pkg/sim/devpool"), m("pkg/ipamd/datastore")}},
		m("pkg/ipamd/datastore"):            {Imports: []string{"fmt", m("pkg/utils/trigger")}, XTestImports: []string{m("pkg/ipamd/podip")}},
		m("pkg/ipamd/warmpool"):             {Imports: []string{"math", "os"}},
		m("pkg/ipamd/pool"):                 {Imports: []string{m("pkg/ipamd/podip")}},
		m("pkg/utils/trigger"):              {Imports: []string{m("pkg/ipamd/pool")}},
		m("pkg/ipamd/podip"):                {Imports: []string{m("pkg/ipamd/internal/testsupport")}},
		m("pkg/cri"):                        {Imports: []string{m("pkg/sim/fakecri")}},
		m("cmd/aws-k8s-agent"):              {Imports: []string{m("pkg/sim/ec2sim")}},
		m("cmd/tools/sim-node"):             {Imports: []string{m("pkg/sim/ec2sim"), m("pkg/ipamd")}},
		m("pkg/sim/devpool"):                {Imports: []string{"fmt"}},
		m("pkg/sim/churn"):                  {Imports: []string{m("rpc")}},
		m("rpc"):                            {},
		m("pkg/sim/fakecri"):                {},
		m("pkg/sim/ec2sim"):                 {},
		m("pkg/ipamd/internal/testsupport"): {Imports: []string{m("pkg/sim/fakecri")}},
		"fmt":                               {},
		"math":                              {},
		"os":                                {},
	}
	var pkgs []*pkg
	for path, p := range graph {
		p.ImportPath = path
		p.DepOnly = !strings.HasPrefix(path, mod)
		pkgs = append(pkgs, p)
	}
	want := []string{
		"pkg/ipamd/datastore imports pkg/ipamd/pool (via pkg/ipamd/datastore -> pkg/utils/trigger -> pkg/ipamd/pool)",
		"pkg/ipamd/datastore test files import pkg/ipamd/podip",
		"pkg/ipamd/warmpool imports os",
		"pkg/ipamd/pool imports pkg/ipamd/podip",
		"pkg/ipamd/podip imports pkg/ipamd/internal/testsupport",
		"pkg/cri imports pkg/sim/fakecri",
		"cmd/aws-k8s-agent imports pkg/sim/ec2sim",
		"pkg/utils/trigger imports pkg/ipamd/pool",
	}
	got := strings.Join(check(rules, pkgs), "\n")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("violation not reported: %s\nreported:\n%s", w, got)
		}
	}
	for _, clean := range []string{"pkg/ipamd imports pkg/sim/devpool", "cmd/tools/sim-node imports", "pkg/sim/churn imports"} {
		if strings.Contains(got, clean) {
			t.Errorf("allowed import reported: %s\nreported:\n%s", clean, got)
		}
	}
}

// check returns one message per rule, importer and first step towards a
// forbidden import: a package that links a forbidden client through one of
// its imports is told once, with the shortest chain, not once per package
// of the client's dependency tree.
func check(rules []rule, pkgs []*pkg) []string {
	byPath := make(map[string]*pkg, len(pkgs))
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	var out []string
	for _, r := range rules {
		for _, p := range pkgs {
			if p.DepOnly || !r.binds(p.ImportPath) {
				continue
			}
			if r.scope == transitive {
				out = append(out, r.walk(byPath, p)...)
			} else {
				for _, imp := range p.Imports {
					if r.refuses(p.ImportPath, imp) {
						out = append(out, fmt.Sprintf("%s imports %s: %s", short(p.ImportPath), short(imp), r.reason))
					}
				}
			}
			if !r.tests {
				continue
			}
			for _, imp := range concat(p.TestImports, p.XTestImports) {
				if r.refuses(p.ImportPath, imp) {
					out = append(out, fmt.Sprintf("%s test files import %s: %s", short(p.ImportPath), short(imp), r.reason))
				}
			}
		}
	}
	return out
}

// walk follows p's non-test imports breadth first and reports, for each of
// p's direct imports that leads to refused packages, the nearest one.
func (r rule) walk(byPath map[string]*pkg, p *pkg) []string {
	type hit struct {
		first string // the refused package nearest to p through this hop
		count int
	}
	parent := map[string]string{p.ImportPath: ""}
	hop := map[string]string{}
	hits := map[string]*hit{}
	var hops []string
	queue := []string{p.ImportPath}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		q, ok := byPath[cur]
		if !ok {
			continue
		}
		for _, next := range q.Imports {
			if _, seen := parent[next]; seen {
				continue
			}
			parent[next] = cur
			hop[next] = hop[cur]
			if cur == p.ImportPath {
				hop[next] = next
			}
			queue = append(queue, next)
			if !r.refuses(p.ImportPath, next) {
				continue
			}
			h := hits[hop[next]]
			if h == nil {
				h = &hit{first: next}
				hits[hop[next]] = h
				hops = append(hops, hop[next])
			}
			h.count++
		}
	}
	var out []string
	for _, first := range hops {
		h := hits[first]
		chain := ""
		if h.first != first {
			var steps []string
			for at := h.first; at != ""; at = parent[at] {
				steps = append([]string{short(at)}, steps...)
			}
			chain = " (via " + strings.Join(steps, " -> ") + ")"
		}
		more := ""
		if h.count > 1 {
			more = fmt.Sprintf(" and %d more forbidden packages through %s", h.count-1, short(first))
		}
		out = append(out, fmt.Sprintf("%s imports %s%s%s: %s", short(p.ImportPath), short(h.first), chain, more, r.reason))
	}
	return out
}

func (r rule) binds(path string) bool { return matchAny(r.pkgs, path) && !matchAny(r.except, path) }

// refuses reports whether r forbids importer from importing imp. A package
// is never refused itself (its external tests import it).
func (r rule) refuses(importer, imp string) bool {
	if imp == importer {
		return false
	}
	if r.allowed != nil {
		return !matchAny(r.allowed, imp)
	}
	return matchAny(r.forbid, imp) && !matchAny(r.unless, imp)
}

func matchAny(patterns []string, path string) bool {
	for _, pat := range patterns {
		if strings.HasPrefix(pat, "./") {
			pat = mod + strings.TrimPrefix(pat, "./")
		}
		if base, ok := strings.CutSuffix(pat, "/..."); ok {
			if path == base || strings.HasPrefix(path, base+"/") {
				return true
			}
			continue
		}
		if path == pat {
			return true
		}
	}
	return false
}

func short(path string) string { return strings.TrimPrefix(path, mod) }

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// loadPackages lists the module's packages and everything they depend on.
func loadPackages(t *testing.T) []*pkg {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,TestImports,XTestImports,DepOnly,Error", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", root, err, stderr.String())
	}
	var pkgs []*pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Error != nil {
			t.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}
