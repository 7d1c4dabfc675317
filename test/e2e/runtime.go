package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/test/components"
	"github.com/aws/amazon-vpc-cni-k8s/test/spawn"
	"github.com/containernetworking/plugins/pkg/ns"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime is the container runtime of one node, driven over the CRI: what
// the harness needs from containerd 1.6, containerd 2.x or CRI-O.
type Runtime interface {
	// Name is the E2E_RUNTIME value that selects it ("containerd",
	// "containerd2", "crio").
	Name() string
	// Version is the runtime's name and version as its CRI reports them
	// (known once it has started).
	Version() string

	// Start launches the runtime and returns once its CRI answers; after
	// Stop it starts the same runtime again on the same root, state and
	// socket path (a runtime restart: running sandboxes stay).
	Start() error
	// Stop ends the runtime process (SIGTERM, then SIGKILL).
	Stop()
	// Running reports whether the runtime process is alive.
	Running() bool

	// Socket is the CRI socket the tests (and the agent) dial.
	Socket() string
	// SocketDir is the node's directory holding Socket: what the chart
	// mounts into aws-node (criSocket.hostDir), never the socket file,
	// because runtimes delete and recreate the socket when they restart.
	SocketDir() string
	// AgentSocketDir is where the chart mounts SocketDir inside aws-node
	// (criSocket.hostDir, mounted at the same path on a real node).
	AgentSocketDir() string
	// CNIConfDir is the directory the runtime reads the conflist from.
	CNIConfDir() string
	// CgroupParent is the cgroup every sandbox of this node goes under,
	// so cleanup knows which cgroups are ours.
	CgroupParent() string
	// PodPIDNamespace is the PID namespace mode the node's pods use
	// (CRI-O here: CONTAINER, see crio.go).
	PodPIDNamespace() runtimeapi.NamespaceMode
	// LogFile is the runtime's own log (tailed when a test fails).
	LogFile() string

	// Verify checks, once a sandbox runs, that the runtime runs the
	// binaries it was given (containerd 2.x: its own shim, not Debian's
	// 1.6 shim on PATH).
	Verify() error
	// Cleanup removes what the runtime leaves outside the node directory
	// or alive after it stopped (shims, runc containers, mounts, shim
	// sockets of the given sandbox IDs, cgroups). Errors are reported.
	Cleanup(sandboxIDs []string) []error
}

// RuntimeEnv selects the nodes' runtime: "containerd" (the default:
// Debian's containerd 1.6 on PATH), "containerd2" (containerd 2.2.9 from
// the components cache) or "crio" (CRI-O 1.34.0 from the cache).
const RuntimeEnv = "E2E_RUNTIME"

// componentsCache is where scripts/ci/components.sh installs the runtimes
// Debian does not ship, one directory per component and version
// (<name>-<version>, versions pinned in test/components/versions.txt),
// each with bin/ and a .done stamp written last.
func componentsCache() string { return components.CacheDir() }

// Runtime names (E2E_RUNTIME values).
const (
	RuntimeContainerd  = "containerd"
	RuntimeContainerd2 = "containerd2"
	RuntimeCRIO        = "crio"
)

// selectedRuntime is the one place E2E_RUNTIME is read. explicit is false
// when it is unset (the default, containerd 1.6).
func selectedRuntime() (name string, explicit bool) {
	v := strings.TrimSpace(os.Getenv(RuntimeEnv))
	if v == "" {
		return RuntimeContainerd, false
	}
	return v, true
}

// componentBin is bin/<name> of a cached component ("containerd-2.2.9").
func componentBin(component, name string) string {
	return filepath.Join(componentsCache(), component, "bin", name)
}

// requireComponent fails t unless the component is fully installed in the
// cache: a selected runtime that is missing is a failure, never a skip.
func requireComponent(t testing.TB, runtime, component string, bins ...string) {
	t.Helper()
	var missing []string
	if done := filepath.Join(componentsCache(), component, ".done"); !isFile(done) {
		missing = append(missing, done)
	}
	for _, b := range bins {
		if fi, err := os.Stat(componentBin(component, b)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, componentBin(component, b))
		}
	}
	if len(missing) > 0 {
		t.Fatalf("e2e: %s=%s but %s is not installed (missing %s): run scripts/ci/components.sh",
			RuntimeEnv, runtime, component, strings.Join(missing, ", "))
	}
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// requireOnPath fails t (explicit selection) or skips it (the default
// runtime, as before E2E_RUNTIME existed) unless every tool is on PATH.
func requireOnPath(t testing.TB, runtime string, explicit bool, hint string, tools ...string) {
	t.Helper()
	var missing []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("e2e: %s not on PATH (%s)", strings.Join(missing, ", "), hint)
	if explicit {
		t.Fatalf("%s=%s: %s; scripts/ci/components.sh installs the runtimes", RuntimeEnv, runtime, msg)
	}
	t.Skip(msg)
}

// requireRuntime checks that the selected runtime can run here (failing t
// when it was selected and is missing) and returns its name.
func requireRuntime(t testing.TB) string {
	t.Helper()
	name, explicit := selectedRuntime()
	switch name {
	case RuntimeContainerd:
		requireOnPath(t, name, explicit, "apt-get install -y containerd runc; .ci/run does it on CI",
			"containerd", "containerd-shim-runc-v2", "ctr", "runc")
	case RuntimeContainerd2:
		requireComponent(t, name, containerd2Component, "containerd", "containerd-shim-runc-v2", "ctr")
		requireOnPath(t, name, true, "apt-get install -y runc", "runc")
	case RuntimeCRIO:
		requireComponent(t, name, crioComponent, "crio", "pinns")
		requireOnPath(t, name, true, "apt-get install -y runc conmon skopeo", "runc", "conmon", "skopeo")
	default:
		t.Fatalf("e2e: %s=%q: want %s, %s or %s", RuntimeEnv, name, RuntimeContainerd, RuntimeContainerd2, RuntimeCRIO)
	}
	return name
}

// RuntimeConfig is what a node gives its runtime.
type RuntimeConfig struct {
	Node       ns.NetNS // the runtime runs in the node's network namespace
	Dir        string   // the node directory: everything the runtime writes goes below it
	CNIBin     string
	CNIConfDir string
	PauseTar   string // docker-archive tarball of PauseImage
}

// StartRuntime starts the named runtime for a node (its image store holds
// PauseImage when it returns).
func StartRuntime(name string, c RuntimeConfig) (Runtime, error) {
	var flavor containerdFlavor
	switch name {
	case RuntimeContainerd:
		flavor = containerd16
	case RuntimeContainerd2:
		flavor = containerd2
	case RuntimeCRIO:
		cr, err := StartCRIO(c)
		if cr == nil {
			return nil, err // no nil *CRIO inside a non-nil Runtime
		}
		return cr, err
	default:
		return nil, fmt.Errorf("unknown runtime %q", name)
	}
	cd, err := StartContainerd(flavor, c)
	if cd == nil {
		return nil, err
	}
	return cd, err
}

// startCRIProcess starts a runtime's process (to die with the test
// binary, see test/spawn) and waits, up to 30 s, until its CRI socket
// answers Version. done closes when the process exits;
// version is the runtime's name and version as its CRI reports them.
func startCRIProcess(name string, cmd *exec.Cmd, sock, logFile string) (done chan struct{}, version string, err error) {
	done = make(chan struct{})
	if err := spawn.Start(cmd); err != nil {
		close(done)
		return done, "", fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		cri, err := DialCRI(sock)
		if err == nil {
			var v *runtimeapi.VersionResponse
			v, err = cri.Version(ctx)
			cri.Close()
			if err == nil {
				return done, v.RuntimeName + " " + v.RuntimeVersion, nil
			}
		}
		select {
		case <-done:
			return done, "", fmt.Errorf("%s exited at start; see %s", name, logFile)
		case <-ctx.Done():
			return done, "", fmt.Errorf("%s not ready in 30s: %v", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
