// Package churn drives pod churn against an ipamd gRPC socket the way the
// CNI plugin does (a new connection per call), and can drop a fraction of
// DELs to model lost deletes. It keeps the ground truth of which pods are
// alive so leaked allocations can be counted. It never imports
// pkg/ipamd/...: it knows ipamd only by its wire API (rpc).
//
// The churn is reproducible: what happens to pod n (its container ID, its
// lifetime, whether its DEL is lost) depends only on the seed and n (see
// PlanPod), and pod n starts n/Rate seconds after Run began, so two runs
// with the same seed attempt the same pods on the same schedule and lose
// the same DELs, whatever ipamd does. A pod whose start fails has no DEL to
// lose, so runs whose ADDs fail differently lose different numbers of DELs.
package churn

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// Config says how to churn.
type Config struct {
	Socket      string
	Rate        float64       // pod creates per second
	MinLifetime time.Duration // a pod lives a random time in [Min, Max]
	MaxLifetime time.Duration
	DropDEL     float64 // fraction of DELs never sent
	// DropFor, when above 0, loses DELs only of pods that start within
	// DropFor of the run's start (a leaky phase, then a clean one).
	DropFor time.Duration
	Seed    uint64
	// Pods, when above 0, is how many pod starts Run attempts before it
	// stops creating (it still returns only when its context ends).
	Pods int
	// Runtime, when set, is told about each pod's sandbox so a CRI view
	// (for the pod-IP reconciler) matches what the driver does.
	Runtime Runtime
}

// Runtime mirrors pod sandboxes the way a container runtime shows them.
type Runtime interface {
	// Starting: the sandbox exists and its CNI ADD is in flight (not listed).
	Starting(id, name, namespace string)
	// Started: ADD returned; the sandbox is listed READY with its IP.
	Started(id, ip string)
	// Gone: the sandbox was stopped and removed.
	Gone(id string)
}

// Counters is a snapshot of what the driver did.
type Counters struct {
	Adds, AddFailures, Dels, LostDels, Live int64
	// FirstFailure is when the first ADD failed, counted from the start of
	// Run; 0 when none failed.
	FirstFailure time.Duration
}

// Pod is what the churn does with one pod.
type Pod struct {
	N           int
	Name        string
	ContainerID string
	Lifetime    time.Duration
	LoseDEL     bool // the pod ends without its DEL reaching ipamd
}

// PlanPod says what happens to pod n under cfg's seed, lifetimes and drop
// fraction. It is pure: the same arguments always give the same pod.
func PlanPod(cfg Config, n int) Pod {
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(n)^0x9e3779b97f4a7c15))
	p := Pod{N: n, Name: fmt.Sprintf("churn-%d", n), ContainerID: fmt.Sprintf("%016x%048d", rng.Uint64(), n)}
	p.Lifetime = cfg.MinLifetime
	if span := cfg.MaxLifetime - cfg.MinLifetime; span > 0 {
		p.Lifetime += time.Duration(rng.Int64N(int64(span)))
	}
	p.LoseDEL = rng.Float64() < cfg.DropDEL && (cfg.DropFor <= 0 || StartOffset(cfg, n) < cfg.DropFor)
	return p
}

// StartOffset is when pod n starts, counted from the start of Run.
func StartOffset(cfg Config, n int) time.Duration {
	return time.Duration(float64(n) * float64(time.Second) / cfg.Rate)
}

// Driver runs the churn. Use Run, then Alive and Counters.
type Driver struct {
	cfg   Config
	start time.Time

	mu       sync.Mutex
	alive    map[string]string    // container IDs of running pods: their IPs
	aliveIP  map[string]string    // the running pods' IPs: their container IDs
	leaked   map[string]time.Time // container IDs of pods gone without a DEL: when
	firstErr time.Duration
	failures []time.Duration // when each failed ADD returned, from the start
	// duplicates are ADDs that were given an address a running pod holds.
	duplicates []string

	adds, addFail, dels, lost atomic.Int64
}

// New returns a driver.
func New(cfg Config) *Driver {
	return &Driver{cfg: cfg, alive: map[string]string{}, aliveIP: map[string]string{}, leaked: map[string]time.Time{}}
}

// Run starts pod n at n/Rate seconds after it is called (pod 0 at once), until ctx ends or
// cfg.Pods were attempted; it returns when ctx ends and every pod goroutine
// has stopped (it does not delete the pods still alive then).
func (d *Driver) Run(ctx context.Context) {
	d.mu.Lock()
	d.start = time.Now()
	d.mu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; d.cfg.Pods <= 0 || n < d.cfg.Pods; n++ {
		// Pod n's slot is fixed relative to the start, so a slow tick never
		// shifts the pods after it.
		wait := time.Until(d.start.Add(StartOffset(d.cfg, n)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		p := PlanPod(d.cfg, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.podLife(ctx, p)
		}()
	}
	<-ctx.Done()
}

func (d *Driver) podLife(ctx context.Context, p Pod) {
	id := p.ContainerID
	d.adds.Add(1)
	if d.cfg.Runtime != nil {
		d.cfg.Runtime.Starting(id, p.Name, "churn")
	}
	var ip string
	ok, err := d.call(func(c rpc.CNIBackendClient) (bool, error) {
		r, err := c.AddNetwork(context.Background(), &rpc.AddNetworkRequest{
			K8S_POD_NAME: p.Name, K8S_POD_NAMESPACE: "churn", K8S_POD_INFRA_CONTAINER_ID: id,
			Netns: "/var/run/netns/cni-" + id[:8], IfName: "eth0", NetworkName: "aws-cni", ContainerID: id,
		})
		if err == nil && r.Success && len(r.IPAllocationMetadata) > 0 {
			ip = r.IPAllocationMetadata[0].IPv4Addr
		}
		return err == nil && r.Success, err
	})
	if err != nil || !ok {
		// The runtime cleans up a failed sandbox with a DEL; it finds nothing.
		d.addFail.Add(1)
		d.mu.Lock()
		at := max(time.Since(d.start), time.Nanosecond)
		if d.firstErr == 0 {
			d.firstErr = at
		}
		d.failures = append(d.failures, at)
		d.mu.Unlock()
		if d.cfg.Runtime != nil {
			d.cfg.Runtime.Gone(id)
		}
		return
	}
	if d.cfg.Runtime != nil {
		d.cfg.Runtime.Started(id, ip)
	}
	d.setAlive(id, ip)
	select {
	case <-ctx.Done():
		return // still running when the run ends
	case <-time.After(p.Lifetime):
	}
	d.setAlive(id, "")
	if p.LoseDEL {
		d.lost.Add(1) // the DEL never reaches ipamd
		d.mu.Lock()
		d.leaked[id] = time.Now()
		d.mu.Unlock()
		if d.cfg.Runtime != nil {
			d.cfg.Runtime.Gone(id)
		}
		return
	}
	d.dels.Add(1)
	_, _ = d.call(func(c rpc.CNIBackendClient) (bool, error) {
		_, err := c.DelNetwork(context.Background(), &rpc.DelNetworkRequest{
			K8S_POD_NAME: p.Name, K8S_POD_NAMESPACE: "churn", K8S_POD_INFRA_CONTAINER_ID: id,
			Reason: "PodDeleted", IfName: "eth0", NetworkName: "aws-cni", ContainerID: id,
		})
		return err == nil, err
	})
	if d.cfg.Runtime != nil {
		d.cfg.Runtime.Gone(id)
	}
}

// call runs f on a fresh connection, as the plugin does per invocation.
func (d *Driver) call(f func(rpc.CNIBackendClient) (bool, error)) (bool, error) {
	conn, err := grpc.NewClient("unix://"+d.cfg.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	return f(rpc.NewCNIBackendClient(conn))
}

// setAlive records a pod running with ip, or ended (ip ""), and notes an
// address given to a second running pod.
func (d *Driver) setAlive(id, ip string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ip == "" {
		if old := d.alive[id]; old != "" && d.aliveIP[old] == id {
			delete(d.aliveIP, old)
		}
		delete(d.alive, id)
		return
	}
	if other, used := d.aliveIP[ip]; used && other != id {
		d.duplicates = append(d.duplicates, fmt.Sprintf("%s given to %s while %s runs with it", ip, id, other))
	}
	d.alive[id], d.aliveIP[ip] = ip, id
}

// Gone reports whether the pod with this container ID ended without its DEL
// reaching ipamd: an allocation under that ID is a leak.
func (d *Driver) Gone(id string) bool {
	_, ok := d.Ended(id)
	return ok
}

// Ended says when the pod with this container ID ended without its DEL
// reaching ipamd.
func (d *Driver) Ended(id string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.leaked[id]
	return at, ok
}

// Failures are when each failed ADD returned, counted from the start of
// Run.
func (d *Driver) Failures() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.failures)
}

// Duplicates lists every ADD that was given an address a running pod
// held: what the reconciler must never cause.
func (d *Driver) Duplicates() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.duplicates)
}

// Counters returns what the driver did so far.
func (d *Driver) Counters() Counters {
	d.mu.Lock()
	live, first := int64(len(d.alive)), d.firstErr
	d.mu.Unlock()
	return Counters{Adds: d.adds.Load(), AddFailures: d.addFail.Load(), Dels: d.dels.Load(), LostDels: d.lost.Load(),
		Live: live, FirstFailure: first}
}
