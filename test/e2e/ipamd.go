package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/test/spawn"
)

// IPAMD runs the real aws-k8s-agent binary as a subprocess in the node's
// network namespace, with host networking on as on EKS: it finds each
// ENI's link by MAC (the simulator makes them, see nodelinks in
// harness.go) and programs the ENI route tables, rules, MTUs, SNAT and
// connmark iptables rules of the node's namespace, never the host's.
//
// The agent has no setting for its DEL-queue directory (it always reads
// /var/run/aws-node/del-queue). So that the tests never write there, each
// run gets a private mount namespace in which the node's RunDir is
// bind-mounted over /run: the agent's /var/run/aws-node/del-queue is then
// RunDir/aws-node/del-queue, the directory the plugin's netconf names
// (delQueueDir). The mount lives and dies with the agent's mount namespace;
// the host never sees it.
//
// The runtime's socket reaches the agent the way the chart mounts it: the
// socket's directory (CRIDir), read-only, at AgentCRIDir inside that mount
// namespace, never the socket file itself (a file mount keeps pointing at
// the old socket after the runtime recreates it).
type IPAMD struct {
	Bin    string
	Node   ns.NetNS
	Dir    string
	RunDir string // bind-mounted over /run for the agent
	CRIDir string // host directory of the runtime socket, mounted read-only at AgentCRIDir; "" mounts nothing
	// AgentCRIDir is where CRIDir appears to the agent (the chart's
	// criSocket.hostDir, mounted at the same path); "" is
	// DefaultAgentCRIDir.
	AgentCRIDir string
	Env         map[string]string // the agent's whole environment (besides PATH, HOME)
	Sock        string            // gRPC socket the plugin dials
	Intro       string            // introspection socket
	Metrics     string
	Store       string // checkpoint file
	LogFile     string
	Output      string // the agent's stdout/stderr

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	http *http.Client
}

// DefaultAgentCRIDir is where the agent sees the runtime's socket
// directory unless AgentCRIDir says otherwise (the chart's
// criSocket.hostDir default, mounted at the same path).
const DefaultAgentCRIDir = "/run/containerd"

// QueueDir is the DEL queue as seen from the test (host) side.
func (p *IPAMD) QueueDir() string { return filepath.Join(p.RunDir, "aws-node", "del-queue") }

// LockDir is, seen from the test side, the directory of the address locks
// the agent takes (hostlock.DefaultDir, /var/run/aws-node/cni-address-locks,
// in its mount namespace) before it removes a gone pod's node rules; the
// plugin's netconf names it too, so both lock the same files as on a node.
func (p *IPAMD) LockDir() string { return filepath.Join(p.RunDir, "aws-node", "cni-address-locks") }

// Start launches the agent and waits until it serves introspection (which
// it does only after the checkpoint is restored, the DEL queue replayed
// and the gRPC socket is listening).
func (p *IPAMD) Start() error {
	if _, err := p.Launch(); err != nil {
		return err
	}
	return p.WaitServing(45 * time.Second)
}

// Launch starts the agent and returns at once with the time just before
// the exec (what start-up figures count from).
func (p *IPAMD) Launch() (time.Time, error) {
	p.mu.Lock()
	if p.cmd != nil && !p.exited() {
		p.mu.Unlock()
		return time.Time{}, errors.New("ipamd already running")
	}
	if p.http == nil {
		p.http = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", p.Intro)
			}}}
	}
	if err := os.MkdirAll(p.QueueDir(), 0o700); err != nil {
		p.mu.Unlock()
		return time.Time{}, err
	}
	script, scriptArgs := `mount --bind "$0" /run && exec "$@"`, []string{p.RunDir}
	if p.CRIDir != "" {
		at := p.AgentCRIDir
		if at == "" {
			at = DefaultAgentCRIDir
		}
		script = `mount --bind "$0" /run && mkdir -p ` + at + ` && mount -o bind,ro "$1" ` + at + ` && shift && exec "$@"`
		scriptArgs = append(scriptArgs, p.CRIDir)
	}
	args := append([]string{"--net=" + p.Node.Path(), "--", "unshare", "--mount", "--propagation", "private", "--",
		"/bin/sh", "-c", script}, scriptArgs...)
	args = append(args, p.Bin, "-socket", p.Sock, "-metrics-address", "unix:"+p.Metrics)
	cmd := exec.Command("nsenter", args...)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + p.Dir}
	for k, v := range p.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	cmd.Env = env
	out, err := os.OpenFile(p.Output, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return time.Time{}, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	launched := time.Now()
	err = spawn.Start(cmd) // dies with the test binary
	out.Close()
	if err != nil {
		p.mu.Unlock()
		return launched, fmt.Errorf("start ipamd: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return launched, nil
}

// WaitServing waits until the launched agent serves introspection.
func (p *IPAMD) WaitServing(within time.Duration) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	deadline := time.Now().Add(within)
	for {
		if _, err := p.ENIs(); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("ipamd exited during start; see %s and %s", p.Output, p.LogFile)
		case <-time.After(25 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ipamd not serving after %v; see %s", within, p.LogFile)
		}
	}
}

// Refusal is the line of the agent's output that refuses a setting as
// "not supported by this build" (the agent then exits before serving), or
// "" if there is none.
func (p *IPAMD) Refusal() string {
	b, err := os.ReadFile(p.Output)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "not supported by this build") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func (p *IPAMD) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Running reports whether the agent process is alive.
func (p *IPAMD) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exited()
}

// PID is the agent's process ID (nsenter, unshare and sh all exec).
func (p *IPAMD) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Stop sends SIGTERM and waits for the exit (SIGKILL after 20 s).
func (p *IPAMD) Stop() error { return p.signal(syscall.SIGTERM, 20*time.Second) }

// Kill sends SIGKILL and waits for the exit.
func (p *IPAMD) Kill() error { return p.signal(syscall.SIGKILL, 10*time.Second) }

func (p *IPAMD) signal(sig syscall.Signal, wait time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("ipamd did not exit within %s of %v; killed", wait, sig)
	}
}

// RSSKiB is the agent's resident set (VmRSS) in KiB.
func (p *IPAMD) RSSKiB() (int, error) {
	pid := p.PID()
	if pid == 0 {
		return 0, errors.New("ipamd not running")
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, errors.New("no VmRSS in status")
}

// Memory splits the agent's resident set (/proc/PID/smaps_rollup): Anon
// is its heap, goroutine stacks and runtime data; File the pages of the
// binary (text, read-only data) and other files it has mapped.
type Memory struct{ RSS, Anon, File int } // KiB

func (m Memory) String() string {
	return fmt.Sprintf("%d KiB (anon %d, file %d)", m.RSS, m.Anon, m.File)
}

// Memory reads the agent's resident set split into anonymous and
// file-backed pages.
func (p *IPAMD) Memory() (Memory, error) {
	pid := p.PID()
	if pid == 0 {
		return Memory{}, errors.New("ipamd not running")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return Memory{}, err
	}
	return parseSmapsRollup(string(b))
}

// parseSmapsRollup reads Rss and Anonymous (kB) from smaps_rollup text;
// File is the rest of Rss.
func parseSmapsRollup(s string) (Memory, error) {
	var m Memory
	var haveRSS, haveAnon bool
	for _, line := range strings.Split(s, "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "Rss" && name != "Anonymous") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		if err != nil {
			return Memory{}, fmt.Errorf("smaps_rollup %s: %w", name, err)
		}
		if name == "Rss" {
			m.RSS, haveRSS = n, true
		} else {
			m.Anon, haveAnon = n, true
		}
	}
	if !haveRSS || !haveAnon {
		return Memory{}, errors.New("smaps_rollup without Rss and Anonymous")
	}
	m.File = m.RSS - m.Anon
	return m, nil
}

func (p *IPAMD) get(path string, v any) error {
	if p.http == nil {
		return errors.New("ipamd never started")
	}
	resp, err := p.http.Get("http://ipamd" + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// ENIs reads /v1/enis (network card 0).
func (p *IPAMD) ENIs() (datastore.ENIInfos, error) {
	cards, err := p.CardENIs()
	return cards[0], err
}

// CardENIs reads /v1/enis: the pool of every managed network card, by
// card index (only card 0 unless ENABLE_MULTI_NIC is on).
func (p *IPAMD) CardENIs() (map[int]datastore.ENIInfos, error) {
	var m map[string]datastore.ENIInfos
	if err := p.get("/v1/enis", &m); err != nil {
		return nil, err
	}
	out := map[int]datastore.ENIInfos{}
	for k, v := range m {
		card, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("/v1/enis: card key %q", k)
		}
		out[card] = v
	}
	return out, nil
}

// ENIConfigName reads /v1/eni-configs: the name of the ENIConfig the agent
// selects for its node.
func (p *IPAMD) ENIConfigName() (string, error) {
	var name string
	return name, p.get("/v1/eni-configs", &name)
}

// ReconcilerStatus is the part of /v1/reconciler the tests read.
type ReconcilerStatus struct {
	Mode     string
	Interval string
	Grace    string
	Totals   struct{ Passes, Skipped, Reclaimed, WouldReclaim, Readopted int }
	LastPass struct {
		Start                                                    time.Time
		Triggered                                                bool
		Skipped                                                  string
		Sandboxes, Allocations, Candidates, Confirmed, Reclaimed int
	}
	Candidates []struct {
		IP, ContainerID, Pod string
		PassesAbsent         int
		Confirmed            bool
	}
	Leaked             int
	PendingAddresses   int
	RuntimeReachable   bool
	LastSuccessfulList time.Time
}

// Reconciler reads /v1/reconciler.
func (p *IPAMD) Reconciler() (ReconcilerStatus, error) {
	var st ReconcilerStatus
	return st, p.get("/v1/reconciler", &st)
}

// Metric reads one sample (a gauge or counter) from the agent's
// Prometheus endpoint: name is the metric's name, with its whole label set
// as exported when it has labels (`m{fn="x"}`).
func (p *IPAMD) Metric(name string) (float64, error) {
	if p.http == nil {
		return 0, errors.New("ipamd never started")
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", p.Metrics)
		}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://ipamd/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("metric %s not exported", name)
}

// AssignedIP is one assigned address as introspection shows it (the
// container ID is blanked there, as upstream does; the pod name is not).
type AssignedIP struct {
	IP            netip.Addr
	ENI           string
	Pod           string // namespace/name
	NetworkName   string
	AssignedSince time.Time
}

// Assigned lists the assigned addresses from introspection, and the total
// pool size.
func (p *IPAMD) Assigned() (map[netip.Addr]AssignedIP, int, error) {
	infos, err := p.ENIs()
	if err != nil {
		return nil, 0, err
	}
	return assignedIn(infos)
}

// AssignedOnCards is Assigned for every managed network card, by card.
func (p *IPAMD) AssignedOnCards() (map[int]map[netip.Addr]AssignedIP, error) {
	cards, err := p.CardENIs()
	if err != nil {
		return nil, err
	}
	out := map[int]map[netip.Addr]AssignedIP{}
	for card, infos := range cards {
		if out[card], _, err = assignedIn(infos); err != nil {
			return nil, fmt.Errorf("card %d: %w", card, err)
		}
	}
	return out, nil
}

// assignedIn lists the assigned addresses of one card's introspection,
// and its pool size.
func assignedIn(infos datastore.ENIInfos) (map[netip.Addr]AssignedIP, int, error) {
	out := map[netip.Addr]AssignedIP{}
	for id, e := range infos.ENIs {
		for _, c := range viewCIDRs(e) {
			for _, a := range c.IPAddresses {
				if a.IPAMKey.IsZero() {
					continue // cooling (a released address has no key)
				}
				ip, err := netip.ParseAddr(a.Address)
				if err != nil {
					return nil, 0, err
				}
				if _, dup := out[ip]; dup {
					return nil, 0, fmt.Errorf("introspection lists %s twice", ip)
				}
				out[ip] = AssignedIP{IP: ip, ENI: id, Pod: a.IPAMMetadata.K8SPodNamespace + "/" + a.IPAMMetadata.K8SPodName,
					NetworkName: a.IPAMKey.NetworkName, AssignedSince: a.AssignedTime}
			}
		}
	}
	if len(out) != infos.AssignedIPs {
		return out, infos.TotalIPs, fmt.Errorf("introspection: %d addresses carry a key but AssignedIPs=%d", len(out), infos.AssignedIPs)
	}
	return out, infos.TotalIPs, nil
}

// viewCIDRs are the ENI's IPv4 CIDRs and IPv6 prefixes (one of the two
// is empty: the agent runs one family).
func viewCIDRs(e datastore.ENIView) []*datastore.CidrView {
	return append(slices.Collect(maps.Values(e.AvailableIPv4Cidrs)), slices.Collect(maps.Values(e.IPv6Cidrs))...)
}

// Checkpoint reads the agent's checkpoint file: container ID -> address.
// It is written before every ADD or DEL answer, so it is the agent's view
// with container IDs.
func (p *IPAMD) Checkpoint() ([]datastore.CheckpointEntry, error) {
	return p.CardCheckpoint(0)
}

// CardCheckpoint reads network card card's checkpoint (card 0's is Store,
// card N's ipam-nic-N.json beside it); a missing file is no allocation.
func (p *IPAMD) CardCheckpoint(card int) ([]datastore.CheckpointEntry, error) {
	b, err := os.ReadFile(datastore.CheckpointPathForCard(p.Store, card))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return datastore.DecodeCheckpoint(b)
}

// BackdateCheckpoint moves every allocation in the stopped agent's
// checkpoint d into the past (allocationTimestamp, Unix nanoseconds),
// leaving the rest of the document as it is: a node whose pods, and whose
// lost DELs, are older than the reconciler's grace period.
func (p *IPAMD) BackdateCheckpoint(d time.Duration) error {
	if p.Running() {
		return errors.New("backdating the checkpoint of a running agent")
	}
	b, err := os.ReadFile(p.Store)
	if err != nil {
		return err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	var allocs []map[string]json.RawMessage
	if err := json.Unmarshal(doc["allocations"], &allocs); err != nil {
		return fmt.Errorf("checkpoint allocations: %w", err)
	}
	for i, a := range allocs {
		var ts int64
		if err := json.Unmarshal(a["allocationTimestamp"], &ts); err != nil {
			return fmt.Errorf("allocation %d: allocationTimestamp: %w", i, err)
		}
		a["allocationTimestamp"] = json.RawMessage(strconv.FormatInt(ts-d.Nanoseconds(), 10))
	}
	if doc["allocations"], err = json.Marshal(allocs); err != nil {
		return err
	}
	if b, err = json.Marshal(doc); err != nil {
		return err
	}
	tmp := p.Store + ".e2e-tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p.Store)
}

// Queue lists the DEL queue entries waiting for the agent.
func (p *IPAMD) Queue() []delqueue.Entry {
	e, _ := delqueue.List(p.QueueDir())
	return e
}

// DropQueue deletes every queued DEL (a node losing /var/run, or a
// runtime that never called DEL): only the reconciler can then reclaim.
func (p *IPAMD) DropQueue() (int, error) {
	ents, err := os.ReadDir(p.QueueDir())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if err := os.Remove(filepath.Join(p.QueueDir(), e.Name())); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// LogLines returns the times of the agent's JSON log lines whose msg
// contains substr.
func (p *IPAMD) LogLines(substr string) ([]time.Time, error) {
	var out []time.Time
	err := p.scanLog(substr, func(at time.Time, _ string) { out = append(out, at) })
	return out, err
}

// LogText returns the agent's JSON log lines whose msg contains substr, as
// written (for a failure message that shows the agent's reasons).
func (p *IPAMD) LogText(substr string) ([]string, error) {
	var out []string
	err := p.scanLog(substr, func(_ time.Time, line string) { out = append(out, line) })
	return out, err
}

// scanLog calls f with the time and text of each of the agent's JSON log
// lines whose msg contains substr, in order.
func (p *IPAMD) scanLog(substr string, f func(at time.Time, line string)) error {
	file, err := os.Open(p.LogFile)
	if err != nil {
		return err
	}
	defer file.Close()
	s := bufio.NewScanner(file)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		var l struct {
			TS  string `json:"ts"` // upstream's layout, see pkg/utils/logger
			Msg string `json:"msg"`
		}
		if json.Unmarshal(s.Bytes(), &l) != nil || !strings.Contains(l.Msg, substr) {
			continue
		}
		ts, err := time.Parse("2006-01-02T15:04:05.000Z0700", l.TS)
		if err != nil {
			return fmt.Errorf("log line time %q: %w", l.TS, err)
		}
		f(ts, s.Text())
	}
	return s.Err()
}
