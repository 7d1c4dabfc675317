package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The test binary doubles as a fake ipamd when FAKE_AGENT_DIR is set. Files
// in that directory steer it (the test creates them) and record what
// happened (the agent creates them):
//
//	listen       (test)  open the socket, health NOT_SERVING
//	serve        (test)  switch health to SERVING
//	exit         (test)  exit on its own with the code in the file
//	started      (agent) written at start: pid
//	signal-<SIG> (agent) a signal arrived
//	exiting      (agent) written just before exiting
//
// FAKE_AGENT_EXIT_AT_START=N exits with N at once; FAKE_AGENT_TERM_EXIT=N
// is the code after a signal (default 0); FAKE_AGENT_TERM_DELAY delays the
// exit after a signal (default 200ms), so a test can see the entrypoint
// wait.
func TestMain(m *testing.M) {
	if dir := os.Getenv("FAKE_AGENT_DIR"); dir != "" {
		os.Exit(fakeAgent(dir, os.Getenv("FAKE_AGENT_SOCKET")))
	}
	os.Exit(m.Run())
}

func fakeAgent(dir, socket string) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }
	mark := func(name, body string) { _ = os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644) }
	exit := func(code int) int { mark("exiting", strconv.Itoa(code)); return code }
	mark("started", strconv.Itoa(os.Getpid()))
	if v := os.Getenv("FAKE_AGENT_EXIT_AT_START"); v != "" {
		n, _ := strconv.Atoi(v)
		return exit(n)
	}
	var hs *health.Server
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case sig := <-sigs:
			mark("signal-"+sig.String(), "")
			delay := 200 * time.Millisecond
			if d, err := time.ParseDuration(os.Getenv("FAKE_AGENT_TERM_DELAY")); err == nil {
				delay = d
			}
			time.Sleep(delay)
			n, _ := strconv.Atoi(os.Getenv("FAKE_AGENT_TERM_EXIT"))
			return exit(n)
		case <-tick.C:
		}
		if hs == nil && exists("listen") {
			lis, err := net.Listen("unix", socket)
			if err != nil {
				fmt.Fprintln(os.Stderr, "fake agent:", err)
				return exit(99)
			}
			hs = health.NewServer()
			hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
			srv := grpc.NewServer()
			healthpb.RegisterHealthServer(srv, hs)
			go func() { _ = srv.Serve(lis) }()
		}
		if hs != nil && exists("serve") {
			hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "exit")); err == nil {
			n, _ := strconv.Atoi(string(b))
			return exit(n)
		}
	}
}

// node is a fake node: a host root with the hostPath mounts, the image's
// /app directory, and the fake agent's control directory.
type node struct {
	t       *testing.T
	host    string // fake host root
	app     string // the image's working directory
	ctl     string // fake agent control directory
	socket  string
	env     map[string]string
	agentEv []string
	logs    *syncBuffer
	// metadata answers the entrypoint's IMDS reads (nil: the SDK client,
	// never reached by tests that need no node IP).
	metadata metadataFunc
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newNode(t *testing.T) *node {
	t.Helper()
	root := t.TempDir()
	// The socket path must stay short (108 bytes).
	sockDir, err := os.MkdirTemp("", "ep")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	n := &node{
		t:      t,
		host:   filepath.Join(root, "host"),
		app:    filepath.Join(root, "app"),
		ctl:    filepath.Join(root, "ctl"),
		socket: filepath.Join(sockDir, "ipamd.sock"),
		logs:   &syncBuffer{},
	}
	for _, d := range []string{n.host, n.app, n.ctl} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for _, b := range cniBinaries {
		require.NoError(t, os.WriteFile(filepath.Join(n.app, b), []byte("#!fake "+b+"\n"), 0o755))
		require.NoError(t, os.Chmod(filepath.Join(n.app, b), 0o755))
	}
	tmpl, err := os.ReadFile(filepath.Join("testdata", conflistName))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(n.app, conflistName), tmpl, 0o644))
	n.env = map[string]string{
		"HOST_CNI_BIN_PATH":     filepath.Join(n.host, "opt/cni/bin"),
		"HOST_CNI_CONFDIR_PATH": filepath.Join(n.host, "etc/cni/net.d"),
	}
	// GORACE: a race-enabled child would otherwise sleep 1 s at exit.
	n.agentEv = []string{"FAKE_AGENT_DIR=" + n.ctl, "FAKE_AGENT_SOCKET=" + n.socket, "GORACE=atexit_sleep_ms=0"}
	return n
}

func (n *node) confPath() string { return filepath.Join(n.host, "etc/cni/net.d", conflistName) }
func (n *node) cniPath() string  { return filepath.Join(n.host, "opt/cni/bin/aws-cni") }

func (n *node) ctlExists(name string) bool {
	_, err := os.Stat(filepath.Join(n.ctl, name))
	return err == nil
}

// touch puts a control file in place at once, with its body: the fake
// agent polls for it and must never read it created but still empty (it
// would take an empty "exit" for code 0).
func (n *node) touch(name, body string) {
	tmp := filepath.Join(n.ctl, "."+name+".tmp")
	require.NoError(n.t, os.WriteFile(tmp, []byte(body), 0o644))
	require.NoError(n.t, os.Rename(tmp, filepath.Join(n.ctl, name)))
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// start runs the entrypoint in-process with the test binary as ipamd.
func (n *node) start(sigs chan os.Signal) <-chan int {
	self, err := os.Executable()
	require.NoError(n.t, err)
	o := options{
		WorkDir: n.app, Agent: self, AgentEnv: n.agentEv, Socket: n.socket,
		HealthInterval: 10 * time.Millisecond, Stdout: n.logs, Stderr: n.logs,
		Metadata: n.metadata,
	}
	log := slog.New(slog.NewTextHandler(n.logs, nil))
	done := make(chan int, 1)
	go func() { done <- run(o, envOf(n.env), sigs, log) }()
	n.t.Cleanup(func() {
		select {
		case <-done:
		default:
			// Never leave a fake agent behind.
			if b, err := os.ReadFile(filepath.Join(n.ctl, "started")); err == nil {
				if pid, _ := strconv.Atoi(string(b)); pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	})
	return done
}

func waitExit(t *testing.T, done <-chan int) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(15 * time.Second):
		t.Fatal("entrypoint did not exit")
		return -1
	}
}

// stillAbsent asserts p does not appear during d.
func stillAbsent(t *testing.T, p string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		require.False(t, exists(p), "%s appeared too early", p)
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConflistOnlyAfterIpamdIsServing(t *testing.T) {
	n := newNode(t)
	sigs := make(chan os.Signal, 1)
	done := n.start(sigs)

	require.Eventually(t, func() bool { return n.ctlExists("started") }, 10*time.Second, 5*time.Millisecond)
	// The plugin binary is installed before ipamd starts, with its mode.
	st, err := os.Stat(n.cniPath())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), st.Mode().Perm())
	b, err := os.ReadFile(n.cniPath())
	require.NoError(t, err)
	assert.Equal(t, "#!fake aws-cni\n", string(b))

	// No socket yet, then a socket that answers NOT_SERVING: no conflist.
	stillAbsent(t, n.confPath(), 150*time.Millisecond)
	n.touch("listen", "")
	require.Eventually(t, func() bool { return exists(n.socket) }, 5*time.Second, 5*time.Millisecond)
	stillAbsent(t, n.confPath(), 200*time.Millisecond)
	assert.False(t, exists(n.confPath()))

	n.touch("serve", "")
	require.Eventually(t, func() bool { return exists(n.confPath()) }, 5*time.Second, 5*time.Millisecond)
	st, err = os.Stat(n.confPath())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	conf, err := os.ReadFile(n.confPath())
	require.NoError(t, err)
	want, err := renderConflist(fixture(t), defaults(t, nil))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(conf))
	assert.False(t, exists(n.confPath()+".tmp"))

	// SIGTERM goes to ipamd; the entrypoint leaves after it, with its code.
	sigs <- syscall.SIGTERM
	code := waitExit(t, done)
	assert.Equal(t, 0, code, n.logs.String())
	assert.True(t, n.ctlExists("signal-terminated"), "ipamd got SIGTERM")
	assert.True(t, n.ctlExists("exiting"), "entrypoint returned before ipamd exited")
}

func TestSignalBeforeHealthyStopsWithoutConflist(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sig      os.Signal
		termExit string
		want     int
	}{
		{"SIGTERM clean", syscall.SIGTERM, "0", 0},
		{"SIGINT clean", syscall.SIGINT, "0", 0},
		{"SIGTERM failing", syscall.SIGTERM, "2", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			n.agentEv = append(n.agentEv, "FAKE_AGENT_TERM_EXIT="+tc.termExit)
			sigs := make(chan os.Signal, 1)
			done := n.start(sigs)
			require.Eventually(t, func() bool { return n.ctlExists("started") }, 10*time.Second, 5*time.Millisecond)
			sigs <- tc.sig
			assert.Equal(t, tc.want, waitExit(t, done), n.logs.String())
			assert.True(t, n.ctlExists("signal-"+tc.sig.String()))
			assert.True(t, n.ctlExists("exiting"))
			assert.False(t, exists(n.confPath()), "no conflist without a healthy ipamd")
		})
	}
}

func TestIpamdExitCodeBecomesOurs(t *testing.T) {
	t.Run("dies before healthy", func(t *testing.T) {
		n := newNode(t)
		n.agentEv = append(n.agentEv, "FAKE_AGENT_EXIT_AT_START=3")
		done := n.start(make(chan os.Signal))
		assert.Equal(t, 1, waitExit(t, done))
		assert.False(t, exists(n.confPath()))
		assert.True(t, exists(n.cniPath()))
		assert.Contains(t, n.logs.String(), "ipamd exited before it became healthy")
	})
	for _, code := range []string{"0", "7"} {
		t.Run("exits "+code+" after healthy", func(t *testing.T) {
			n := newNode(t)
			done := n.start(make(chan os.Signal))
			n.touch("listen", "")
			n.touch("serve", "")
			require.Eventually(t, func() bool { return exists(n.confPath()) }, 10*time.Second, 5*time.Millisecond)
			n.touch("exit", code)
			want := 0
			if code != "0" {
				want = 1
			}
			assert.Equal(t, want, waitExit(t, done))
		})
	}
}

func TestNothingStartsOnBadInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(n *node)
		msg   string
	}{
		{"invalid env", func(n *node) { n.env["AWS_VPC_K8S_CNI_VETHPREFIX"] = "eth" }, "invalid configuration"},
		{"invalid PD env", func(n *node) { n.env["ENABLE_PREFIX_DELEGATION"] = "true" }, "ENABLE_PREFIX_DELEGATION"},
		{"unparsable bool is logged", func(n *node) {
			n.env["ENABLE_BANDWIDTH_PLUGIN"] = "maybe"
			n.env["AWS_VPC_K8S_CNI_VETHPREFIX"] = "eth"
		}, "env=ENABLE_BANDWIDTH_PLUGIN value=maybe using=false"},
		{"missing template", func(n *node) { require.NoError(t, os.Remove(filepath.Join(n.app, conflistName))) }, "cannot read the conflist template"},
		{"invalid template", func(n *node) {
			require.NoError(t, os.WriteFile(filepath.Join(n.app, conflistName), []byte(`{"plugins":`), 0o644))
		}, "cannot render the conflist"},
		{"missing aws-cni", func(n *node) { require.NoError(t, os.Remove(filepath.Join(n.app, "aws-cni"))) }, "cannot install the CNI plugins"},
		{"missing egress-cni", func(n *node) { require.NoError(t, os.Remove(filepath.Join(n.app, "egress-cni"))) }, "cannot install the CNI plugins"},
		{"IPv6 cluster without the node's IPv4 address", func(n *node) {
			n.env["ENABLE_IPv6"] = "true"
			n.metadata = fakeIMDS(t, map[string]string{}).metadata()
		}, "ENABLE_V4_EGRESS"},
		{"missing agent", func(n *node) { n.agentEv = nil }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			tc.setup(n)
			var code int
			if tc.name == "missing agent" {
				o := options{WorkDir: n.app, Socket: n.socket, Stdout: n.logs, Stderr: n.logs}
				code = run(o, envOf(n.env), make(chan os.Signal), slog.New(slog.NewTextHandler(n.logs, nil)))
				assert.Contains(t, n.logs.String(), "cannot start ipamd")
			} else {
				code = waitExit(t, n.start(make(chan os.Signal)))
				assert.Contains(t, n.logs.String(), tc.msg)
				assert.False(t, n.ctlExists("started"), "ipamd must not start")
			}
			assert.Equal(t, 1, code)
			assert.False(t, exists(n.confPath()))
		})
	}
}

func TestConflistWriteFailureStopsIpamd(t *testing.T) {
	n := newNode(t)
	// A regular file where the conf directory should be.
	require.NoError(t, os.MkdirAll(filepath.Join(n.host, "etc/cni"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(n.host, "etc/cni/net.d"), nil, 0o644))
	n.agentEv = append(n.agentEv, "FAKE_AGENT_TERM_DELAY=0s")
	done := n.start(make(chan os.Signal))
	n.touch("listen", "")
	n.touch("serve", "")
	assert.Equal(t, 1, waitExit(t, done))
	assert.True(t, n.ctlExists("signal-terminated"))
	assert.Contains(t, n.logs.String(), "cannot write the conflist")
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-workdir", "/w", "-agent", "/a", "-socket", "/s", "-health-interval", "1s", "--", "-x", "y"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, options{WorkDir: "/w", Agent: "/a", Socket: "/s", HealthInterval: time.Second, AgentArgs: []string{"-x", "y"}}, o)
	o, err = parseFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, options{WorkDir: ".", Agent: defaultAgent, Socket: defaultSocket, HealthInterval: defaultHealthInterval}, o)
	_, err = parseFlags([]string{"-bogus"}, &bytes.Buffer{})
	assert.Error(t, err)
	_, err = parseFlags([]string{"-health-interval", "0s"}, &bytes.Buffer{})
	assert.Error(t, err)
}
