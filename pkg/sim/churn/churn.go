// Package churn drives pod churn against an ipamd gRPC socket the way the
// CNI plugin does (a new connection per call), and can drop a fraction of
// DELs to model lost deletes. It keeps the ground truth of which pods are
// alive so leaked allocations can be counted. It never imports
// pkg/ipamd/...: it knows ipamd only by its wire API (rpc).
package churn

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	Seed        uint64
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
}

// Driver runs the churn. Use Run, then Alive and Counters.
type Driver struct {
	cfg   Config
	rng   *rand.Rand
	rngMu sync.Mutex

	mu     sync.Mutex
	alive  map[string]bool // container IDs of running pods
	leaked map[string]bool // container IDs of pods gone without a DEL

	adds, addFail, dels, lost atomic.Int64
}

// New returns a driver.
func New(cfg Config) *Driver {
	return &Driver{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), alive: map[string]bool{}, leaked: map[string]bool{}}
}

// Run creates pods until ctx ends, then waits for the pods it started to
// finish their lifetimes being tracked (it does not delete survivors).
func (d *Driver) Run(ctx context.Context) {
	interval := time.Duration(float64(time.Second) / d.cfg.Rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var wg sync.WaitGroup
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		d.rngMu.Lock()
		id := fmt.Sprintf("%016x%048d", d.rng.Uint64(), i)
		d.rngMu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.podLife(ctx, id, i)
		}()
	}
}

func (d *Driver) lifetime() time.Duration {
	d.rngMu.Lock()
	defer d.rngMu.Unlock()
	span := d.cfg.MaxLifetime - d.cfg.MinLifetime
	if span <= 0 {
		return d.cfg.MinLifetime
	}
	return d.cfg.MinLifetime + time.Duration(d.rng.Int64N(int64(span)))
}

func (d *Driver) dropThis() bool {
	d.rngMu.Lock()
	defer d.rngMu.Unlock()
	return d.rng.Float64() < d.cfg.DropDEL
}

func (d *Driver) podLife(ctx context.Context, id string, n int) {
	name := fmt.Sprintf("churn-%d", n)
	d.adds.Add(1)
	if d.cfg.Runtime != nil {
		d.cfg.Runtime.Starting(id, name, "churn")
	}
	var ip string
	ok, err := d.call(func(c rpc.CNIBackendClient) (bool, error) {
		r, err := c.AddNetwork(context.Background(), &rpc.AddNetworkRequest{
			K8S_POD_NAME: name, K8S_POD_NAMESPACE: "churn", K8S_POD_INFRA_CONTAINER_ID: id,
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
		if d.cfg.Runtime != nil {
			d.cfg.Runtime.Gone(id)
		}
		return
	}
	if d.cfg.Runtime != nil {
		d.cfg.Runtime.Started(id, ip)
	}
	d.setAlive(id, true)
	select {
	case <-ctx.Done():
		return // still running when the run ends
	case <-time.After(d.lifetime()):
	}
	d.setAlive(id, false)
	if d.dropThis() {
		d.lost.Add(1) // the DEL never reaches ipamd
		d.mu.Lock()
		d.leaked[id] = true
		d.mu.Unlock()
		if d.cfg.Runtime != nil {
			d.cfg.Runtime.Gone(id)
		}
		return
	}
	d.dels.Add(1)
	_, _ = d.call(func(c rpc.CNIBackendClient) (bool, error) {
		_, err := c.DelNetwork(context.Background(), &rpc.DelNetworkRequest{
			K8S_POD_NAME: name, K8S_POD_NAMESPACE: "churn", K8S_POD_INFRA_CONTAINER_ID: id,
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

func (d *Driver) setAlive(id string, alive bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if alive {
		d.alive[id] = true
	} else {
		delete(d.alive, id)
	}
}

// Gone reports whether the pod with this container ID ended without its DEL
// reaching ipamd: an allocation under that ID is a leak.
func (d *Driver) Gone(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.leaked[id]
}

// Counters returns what the driver did so far.
func (d *Driver) Counters() Counters {
	d.mu.Lock()
	live := int64(len(d.alive))
	d.mu.Unlock()
	return Counters{Adds: d.adds.Load(), AddFailures: d.addFail.Load(), Dels: d.dels.Load(), LostDels: d.lost.Load(), Live: live}
}
