package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

const primaryMAC = "0a:1b:2c:3d:4e:5f"

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func fakeInterfaces() ([]net.Interface, error) {
	mac := func(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }
	return []net.Interface{
		{Index: 1, Name: "lo"},
		{Index: 2, Name: "ens5", HardwareAddr: mac(primaryMAC)},
		{Index: 3, Name: "ens6", HardwareAddr: mac("0a:00:00:00:00:01")},
	}, nil
}

func fakeDeps() deps {
	return deps{
		PrimaryMAC: func(context.Context) (string, error) { return primaryMAC + "\n", nil },
		Interfaces: fakeInterfaces,
	}
}

// fakeNode has the image's /init, a host bin dir and a /proc/sys tree with
// the kernel's defaults.
type fakeNode struct {
	init, bin, procSys string
}

var procDefaults = map[string]string{
	"net/ipv4/conf/ens5/rp_filter":     "1",
	"net/ipv4/conf/ens6/rp_filter":     "1",
	"net/ipv4/tcp_early_demux":         "1",
	"net/ipv6/conf/all/disable_ipv6":   "1",
	"net/ipv6/conf/all/forwarding":     "0",
	"net/ipv6/conf/ens5/accept_ra":     "1",
	"net/ipv6/conf/default/accept_ra":  "1",
	"net/ipv6/conf/default/forwarding": "0",
}

func newFakeNode(t *testing.T) fakeNode {
	root := t.TempDir()
	n := fakeNode{init: filepath.Join(root, "init"), bin: filepath.Join(root, "host/opt/cni/bin"), procSys: filepath.Join(root, "proc/sys")}
	require.NoError(t, os.MkdirAll(filepath.Join(n.init, "subdir"), 0o755))
	for name, mode := range map[string]os.FileMode{
		"loopback": 0o755, "portmap": 0o755, "host-local": 0o755, "LICENSE": 0o644,
		"aws-cni-support.sh": 0o755, selfName: 0o755, "subdir/nested": 0o755,
	} {
		p := filepath.Join(n.init, name)
		require.NoError(t, os.WriteFile(p, []byte("content of "+name), mode))
		require.NoError(t, os.Chmod(p, mode))
	}
	require.NoError(t, os.Symlink("loopback", filepath.Join(n.init, "lo-link")))
	for k, v := range procDefaults {
		p := filepath.Join(n.procSys, k)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(v+"\n"), 0o644))
	}
	return n
}

func (n fakeNode) run(env map[string]string, d deps) error {
	if env == nil {
		env = map[string]string{}
	}
	env["HOST_CNI_BIN_PATH"] = n.bin
	o := options{WorkDir: n.init, ProcSys: n.procSys, Self: selfName}
	return run(context.Background(), o, envOf(env), d, slog.New(slog.DiscardHandler))
}

func (n fakeNode) sysctls(t *testing.T) map[string]string {
	out := map[string]string{}
	for k := range procDefaults {
		b, err := os.ReadFile(filepath.Join(n.procSys, k))
		require.NoError(t, err)
		out[k] = string(b)
	}
	return out
}

func TestCopiesEveryRegularFileButItself(t *testing.T) {
	n := newFakeNode(t)
	require.NoError(t, n.run(nil, fakeDeps()))
	entries, err := os.ReadDir(n.bin)
	require.NoError(t, err)
	got := map[string]os.FileMode{}
	for _, e := range entries {
		st, err := os.Stat(filepath.Join(n.bin, e.Name()))
		require.NoError(t, err)
		got[e.Name()] = st.Mode()
	}
	assert.Equal(t, map[string]os.FileMode{
		"loopback": 0o755, "portmap": 0o755, "host-local": 0o755, "LICENSE": 0o644, "aws-cni-support.sh": 0o755,
	}, got)
	b, err := os.ReadFile(filepath.Join(n.bin, "portmap"))
	require.NoError(t, err)
	assert.Equal(t, "content of portmap", string(b))
}

func TestSysctls(t *testing.T) {
	changed := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range procDefaults {
			out[k] = v + "\n"
		}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want map[string]string
	}{
		{"defaults", nil, changed(map[string]string{
			"net/ipv4/conf/ens5/rp_filter": "2", "net/ipv4/tcp_early_demux": "1"})},
		{"early demux off", map[string]string{"DISABLE_TCP_EARLY_DEMUX": "true"}, changed(map[string]string{
			"net/ipv4/conf/ens5/rp_filter": "2", "net/ipv4/tcp_early_demux": "0"})},
		{"ipv6", map[string]string{"ENABLE_IPv6": "true"}, changed(map[string]string{
			"net/ipv4/conf/ens5/rp_filter": "2", "net/ipv4/tcp_early_demux": "1",
			"net/ipv6/conf/all/disable_ipv6": "0", "net/ipv6/conf/all/forwarding": "1", "net/ipv6/conf/ens5/accept_ra": "2"})},
		{"v6 egress", map[string]string{"ENABLE_V6_EGRESS": "true", "DISABLE_TCP_EARLY_DEMUX": "false"}, changed(map[string]string{
			"net/ipv4/conf/ens5/rp_filter": "2", "net/ipv4/tcp_early_demux": "1",
			"net/ipv6/conf/all/forwarding": "1", "net/ipv6/conf/ens5/accept_ra": "2"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t)
			require.NoError(t, n.run(tc.env, fakeDeps()))
			assert.Equal(t, tc.want, n.sysctls(t))
		})
	}
}

func TestUnparsableBoolWarnsAndKeepsDefault(t *testing.T) {
	n := newFakeNode(t)
	var logs bytes.Buffer
	env := map[string]string{"HOST_CNI_BIN_PATH": n.bin, "DISABLE_TCP_EARLY_DEMUX": "yes please"}
	o := options{WorkDir: n.init, ProcSys: n.procSys, Self: selfName}
	require.NoError(t, run(context.Background(), o, envOf(env), fakeDeps(), slog.New(slog.NewTextHandler(&logs, nil))))
	assert.Equal(t, "1", n.sysctls(t)["net/ipv4/tcp_early_demux"], "default: early demux stays on")
	assert.Contains(t, logs.String(), `env=DISABLE_TCP_EARLY_DEMUX value="yes please" using=false`)
}

// Upstream's init parses its booleans with the helper that also
// complains about a set but empty value.
func TestEmptyBoolWarns(t *testing.T) {
	var warned [][3]string
	env := envutil.Env{Lookup: envOf(map[string]string{"ENABLE_IPv6": ""}),
		Warn: func(name, value, used string) { warned = append(warned, [3]string{name, value, used}) }}
	assert.Len(t, plan("eth0", env), 2, "rp_filter and early demux only")
	assert.Equal(t, [][3]string{{"ENABLE_IPv6", "", "false"}}, warned)
}

func TestEarlyDemuxSkippedWhenAbsent(t *testing.T) {
	n := newFakeNode(t)
	p := filepath.Join(n.procSys, "net/ipv4/tcp_early_demux")
	require.NoError(t, os.Remove(p))
	require.NoError(t, n.run(map[string]string{"DISABLE_TCP_EARLY_DEMUX": "true"}, fakeDeps()))
	_, err := os.Stat(p)
	assert.True(t, os.IsNotExist(err), "never created")
}

func TestFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(n *fakeNode, d *deps)
		msg   string
	}{
		{"imds down", func(_ *fakeNode, d *deps) {
			d.PrimaryMAC = func(context.Context) (string, error) { return "", errors.New("no route to IMDS") }
		}, "no route to IMDS"},
		{"bad mac", func(_ *fakeNode, d *deps) {
			d.PrimaryMAC = func(context.Context) (string, error) { return "not-a-mac", nil }
		}, "not-a-mac"},
		{"no such interface", func(_ *fakeNode, d *deps) {
			d.PrimaryMAC = func(context.Context) (string, error) { return "0a:ff:ff:ff:ff:ff", nil }
		}, "no interface has"},
		{"interface listing fails", func(_ *fakeNode, d *deps) {
			d.Interfaces = func() ([]net.Interface, error) { return nil, errors.New("netlink broke") }
		}, "netlink broke"},
		{"rp_filter missing", func(n *fakeNode, _ *deps) {
			require.NoError(t, os.Remove(filepath.Join(n.procSys, "net/ipv4/conf/ens5/rp_filter")))
		}, "rp_filter"},
		{"ipv6 forwarding missing", func(n *fakeNode, _ *deps) {
			require.NoError(t, os.Remove(filepath.Join(n.procSys, "net/ipv6/conf/all/forwarding")))
		}, "forwarding"},
		{"bin dir unusable", func(n *fakeNode, _ *deps) {
			require.NoError(t, os.MkdirAll(filepath.Dir(n.bin), 0o755))
			require.NoError(t, os.WriteFile(n.bin, nil, 0o644))
		}, "install CNI plugins"},
		{"workdir missing", func(n *fakeNode, _ *deps) { n.init = filepath.Join(n.init, "nope") }, "install CNI plugins"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t)
			d := fakeDeps()
			tc.setup(&n, &d)
			err := n.run(map[string]string{"ENABLE_V6_EGRESS": "true"}, d)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

// fakeIMDS serves IMDSv2's token and the mac path.
func fakeIMDS(t *testing.T, mac string) (*httptest.Server, *atomic.Int32) {
	var macReads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
			_, _ = io.WriteString(w, "token")
		case r.Method == http.MethodGet && r.URL.Path == "/latest/meta-data/mac":
			if r.Header.Get("X-Aws-Ec2-Metadata-Token") != "token" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			macReads.Add(1)
			_, _ = io.WriteString(w, mac)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &macReads
}

func TestIMDSPrimaryMACHonoursEndpointEnv(t *testing.T) {
	srv, reads := fakeIMDS(t, primaryMAC)
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", srv.URL)
	mac, err := imdsPrimaryMAC(context.Background())
	require.NoError(t, err)
	assert.Equal(t, primaryMAC, mac)
	assert.Equal(t, int32(1), reads.Load())
}

// TestRealDependencies runs with the SDK's IMDS client (against a fake
// IMDS announcing one of this machine's real MACs) and the real interface
// list.
func TestRealDependencies(t *testing.T) {
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	var pick *net.Interface
	for i := range ifs {
		if len(ifs[i].HardwareAddr) == 6 {
			pick = &ifs[i]
			break
		}
	}
	if pick == nil {
		t.Skip("no interface with a MAC address")
	}
	srv, _ := fakeIMDS(t, pick.HardwareAddr.String())
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", srv.URL)
	n := newFakeNode(t)
	rp := filepath.Join(n.procSys, "net/ipv4/conf", pick.Name, "rp_filter")
	require.NoError(t, os.MkdirAll(filepath.Dir(rp), 0o755))
	require.NoError(t, os.WriteFile(rp, []byte("1\n"), 0o644))
	require.NoError(t, n.run(nil, deps{PrimaryMAC: imdsPrimaryMAC, Interfaces: net.Interfaces}))
	b, err := os.ReadFile(rp)
	require.NoError(t, err)
	assert.Equal(t, "2", string(b))
}
