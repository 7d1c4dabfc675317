package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// FirstADD is what a stream of ADDs, issued on the agent's socket from the
// moment it was launched, saw until one returned an address.
type FirstADD struct {
	Launched time.Time // just before the agent's exec
	// FirstAnswer is the first ADD the agent answered at all (its socket
	// was listening), At the first that returned an address.
	FirstAnswer, At time.Time
	IP              netip.Addr
	DeviceNumber    int32 // the address's ENI (0: the primary)
	Attempts        int
	// Refused counts the answers before At by kind: "no socket" (the
	// socket was not listening yet), "no address" (the agent answered
	// with no address), or the gRPC code.
	Refused map[string]int

	req *rpc.AddNetworkRequest
}

// Took is launch to the first ADD that returned an address.
func (f FirstADD) Took() time.Duration { return f.At.Sub(f.Launched) }

// String sums the stream up for a FIGURE line.
func (f FirstADD) String() string {
	kinds := make([]string, 0, len(f.Refused))
	for k, n := range f.Refused {
		kinds = append(kinds, fmt.Sprintf("%s x%d", k, n))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("%v (socket answered at +%v; %d ADDs: %s; got %s on device %d)",
		f.Took().Round(time.Millisecond), f.FirstAnswer.Sub(f.Launched).Round(time.Millisecond),
		f.Attempts, strings.Join(kinds, ", "), f.IP, f.DeviceNumber)
}

// probeEvery is how often the probe issues an ADD while none succeeds.
const probeEvery = 5 * time.Millisecond

// ProbeFirstADD issues AddNetwork (as the plugin does, one pod's key) on
// the agent's socket every probeEvery until one returns an address or ctx
// ends. The client redials every few milliseconds, so the socket
// appearing is seen at once. Call it right after Launch.
func (p *IPAMD) ProbeFirstADD(ctx context.Context, launched time.Time, pod string) (FirstADD, error) {
	f := FirstADD{Launched: launched, Refused: map[string]int{}, req: &rpc.AddNetworkRequest{
		ContainerID: newUID(), IfName: "eth0", NetworkName: "aws-cni", Netns: "/var/run/netns/ready-probe",
		K8S_POD_NAME: pod, K8S_POD_NAMESPACE: podNS, ClientVersion: version.RPCVersion}}
	f.req.K8S_POD_INFRA_CONTAINER_ID = f.req.ContainerID
	conn, err := grpc.NewClient("unix://"+p.Sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: time.Second,
			Backoff: backoff.Config{BaseDelay: probeEvery, Multiplier: 1, MaxDelay: probeEvery}}))
	if err != nil {
		return f, err
	}
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	for {
		f.Attempts++
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := c.AddNetwork(cctx, f.req)
		cancel()
		now := time.Now()
		if err == nil && f.FirstAnswer.IsZero() {
			f.FirstAnswer = now
		}
		switch {
		case err == nil && r.Success && len(r.IPAllocationMetadata) > 0:
			f.At = now
			m := r.IPAllocationMetadata[0]
			f.IP, _ = netip.ParseAddr(m.IPv4Addr)
			if !f.IP.IsValid() {
				f.IP, _ = netip.ParseAddr(m.IPv6Addr)
			}
			f.DeviceNumber = m.DeviceNumber
			return f, nil
		case err == nil:
			f.Refused["no address"]++
		case status.Code(err) == codes.Unavailable:
			f.Refused["no socket"]++
		default:
			f.Refused[status.Code(err).String()]++
		}
		select {
		case <-ctx.Done():
			return f, fmt.Errorf("no ADD returned an address after %d attempts (%v; last: %v): %w", f.Attempts, f.Refused, err, ctx.Err())
		case <-time.After(probeEvery):
		}
	}
}

// ReleaseProbe sends the DEL for the probe's address.
func (p *IPAMD) ReleaseProbe(ctx context.Context, f FirstADD) error {
	conn, err := grpc.NewClient("unix://"+p.Sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	r, err := rpc.NewCNIBackendClient(conn).DelNetwork(ctx, &rpc.DelNetworkRequest{
		ContainerID: f.req.ContainerID, IfName: f.req.IfName, NetworkName: f.req.NetworkName,
		K8S_POD_NAME: f.req.K8S_POD_NAME, K8S_POD_NAMESPACE: f.req.K8S_POD_NAMESPACE,
		K8S_POD_INFRA_CONTAINER_ID: f.req.ContainerID, Reason: "e2e ready probe", ClientVersion: version.RPCVersion})
	if err != nil {
		return err
	}
	if !r.Success {
		return fmt.Errorf("DEL of the probe's %s refused", f.IP)
	}
	return nil
}

// LogRecord is one of the agent's JSON log lines: its time and fields.
type LogRecord struct {
	At     time.Time
	Fields map[string]any
}

// Str is a field as a string ("" if absent).
func (r LogRecord) Str(k string) string {
	v, _ := r.Fields[k].(string)
	return v
}

// LogRecords returns the agent's log lines whose msg is msg, logged at or
// after since (the log's times are to the millisecond).
func (p *IPAMD) LogRecords(msg string, since time.Time) ([]LogRecord, error) {
	f, err := os.Open(p.LogFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []LogRecord
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	since = since.Truncate(time.Millisecond)
	for s.Scan() {
		var m map[string]any
		if json.Unmarshal(s.Bytes(), &m) != nil || m["msg"] != msg {
			continue
		}
		ts, _ := m["ts"].(string)
		at, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts)
		if err != nil {
			return nil, fmt.Errorf("log line time %q: %w", ts, err)
		}
		if !at.Before(since) {
			out = append(out, LogRecord{At: at, Fields: m})
		}
	}
	return out, s.Err()
}

// startPhaseNames are the agent's start-up phases as its "start-up phases
// done" line names them (pkg/ipamd/agent_start.go), in order.
var startPhaseNames = []string{"beforeStart", "instance", "kubernetes", "runtime", "datastore", "addresses",
	"reconciler", "pool", "enisweep", "imdsrefresh", "restore", "delqueue", "size", "rpc"}

// StartBreakdown is the agent's own account of the start launched at
// since: each phase's time (phases under a millisecond left out), the
// checkpoint restore inside "restore", and when it logged that it was
// serving, relative to the launch.
func (p *IPAMD) StartBreakdown(since time.Time) string {
	var parts []string
	if recs, err := p.LogRecords("start-up phases done", since); err == nil && len(recs) > 0 {
		r := recs[0]
		for _, name := range startPhaseNames {
			if v := r.Str(name); v != "" && v != "0s" {
				parts = append(parts, name+"="+v)
			}
		}
		for k := range r.Fields {
			if !strings.Contains(" ts level msg caller sinceProcessStart "+strings.Join(startPhaseNames, " ")+" ", " "+k+" ") {
				parts = append(parts, k+"="+fmt.Sprint(r.Fields[k])) // a phase this list does not know yet
			}
		}
		parts = append(parts, "sinceProcessStart="+r.Str("sinceProcessStart"))
	} else {
		parts = append(parts, "no start-up phases line")
	}
	if recs, err := p.LogRecords("checkpoint restored", since); err == nil && len(recs) > 0 {
		parts = append(parts, "checkpointLoad="+recs[0].Str("took"))
	}
	for _, m := range []string{"node initialised", "ipamd serving"} {
		if recs, err := p.LogRecords(m, since); err == nil && len(recs) > 0 {
			parts = append(parts, fmt.Sprintf("%q at +%v", m, recs[0].At.Sub(since.Truncate(time.Millisecond))))
		}
	}
	return strings.Join(parts, " ")
}
