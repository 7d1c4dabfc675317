package kubenode

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// A chained plugin of the user's own after aws-cni's (a policy or a
// bandwidth plugin), here one that fails DEL on demand (./faildel).

const (
	// FailDelPlugin is the chained plugin's type (its binary's name in
	// the node's /opt/cni/bin).
	FailDelPlugin = "kubenode-faildel"
	// FailDelFlag is the node file whose presence makes its DEL fail.
	FailDelFlag      = "/run/kubenode-fail-del"
	conflistTemplate = "../../misc/10-aws.conflist"
)

// InstallFailDelPlugin builds ./faildel into the node's /opt/cni/bin.
func (n *Node) InstallFailDelPlugin(t testing.TB) {
	t.Helper()
	gobin, err := goBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := n.Box.HostPath("/opt/cni/bin")
	tmp := filepath.Join(dir, "."+FailDelPlugin+".tmp")
	cmd := exec.Command(gobin, "build", "-o", tmp, "./faildel")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubenode: build the chained plugin: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, filepath.Join(dir, FailDelPlugin)); err != nil {
		t.Fatal(err)
	}
}

// ChainFailDel re-applies the chart with cniConfig.fileContents: the
// image's conflist template with the fail-on-DEL plugin chained last,
// and waits until a new aws-node pod is Ready and has written that
// conflist into the node's /etc/cni/net.d.
func (n *Node) ChainFailDel(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(conflistTemplate)
	if err != nil {
		t.Fatal(err)
	}
	var conf map[string]interface{}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatalf("kubenode: %s: %v", conflistTemplate, err)
	}
	plugins, _ := conf["plugins"].([]interface{})
	conf["plugins"] = append(plugins, map[string]interface{}{
		"name": FailDelPlugin, "type": FailDelPlugin, "failDelFlag": FailDelFlag,
	})
	contents, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	old := n.AgentPod()
	vals := n.chartValues(nil)
	vals["cniConfig"] = map[string]interface{}{"enabled": true, "fileContents": string(contents)}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.API.ApplyChart(ch, AgentNamespace, vals); err != nil {
		t.Fatalf("kubenode: apply the chart with cniConfig: %v", err)
	}
	path := n.Box.HostPath("/etc/cni/net.d/10-aws.conflist")
	var last string
	if !poll(4*time.Minute, func() bool {
		p := n.AgentPod()
		if p == nil || (old != nil && p.UID == old.UID) {
			last = "no new Ready aws-node pod"
			return false
		}
		last, err = lastPluginType(path)
		if err != nil {
			last = err.Error()
		}
		return last == FailDelPlugin
	}) {
		t.Fatalf("kubenode: the conflist with %s chained last not in place after 4m (%s)\n%s", FailDelPlugin, last, n.Diagnose())
	}
}

// lastPluginType is the type of a conflist's last plugin.
func lastPluginType(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var conf struct {
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(conf.Plugins) == 0 {
		return "", fmt.Errorf("%s: no plugins", path)
	}
	return conf.Plugins[len(conf.Plugins)-1].Type, nil
}

// SetFailDel creates (on) or removes (off) the flag file in the node.
func (n *Node) SetFailDel(on bool) error {
	args := []string{"rm", "-f", FailDelFlag}
	if on {
		args = []string{"touch", FailDelFlag}
	}
	if out, err := n.Box.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// linesWith are the lines of a file that contain any of words (at most
// max, the last ones).
func linesWith(path string, max int, words ...string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, w := range words {
			if w != "" && strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}

// AgentMetrics reads the named samples (a gauge's or a counter's, with
// the whole label set as exported when it has labels) from ipamd's
// Prometheus endpoint (:61678 in the node's network namespace); a sample
// not exported is absent from the map.
func (n *Node) AgentMetrics(names ...string) (map[string]float64, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var conn net.Conn
			// The socket is made on the thread Do moved into the node's namespace.
			err := n.Box.Net.Node.Do(func(ns.NetNS) error {
				var d net.Dialer
				var err error
				conn, err = d.DialContext(ctx, "tcp", "127.0.0.1:61678")
				return err
			})
			return conn, err
		}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://ipamd/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		for _, name := range names {
			if v, ok := strings.CutPrefix(s.Text(), name+" "); ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					out[name] = f
				}
			}
		}
	}
	return out, s.Err()
}
