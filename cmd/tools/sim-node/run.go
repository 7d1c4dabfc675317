package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/churn"
)

// run is one mode's node, its ipamd and its churn.
type run struct {
	mode      string
	o         options
	node      *node
	drv       *churn.Driver
	stopAgent context.CancelFunc
	agentDone chan error
}

// startRun builds a node whose reconciler runs in mode and starts its
// ipamd; the churn starts with churn.
func startRun(o options, mode string) (*run, error) {
	n, err := startNode(o, mode)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &run{mode: mode, o: o, node: n, stopAgent: stop, agentDone: make(chan error, 1)}
	go func() { r.agentDone <- n.agent.Run(ctx) }()
	if err := waitForSocket(n.ipamdSocket(), 10*time.Second, r.agentDone); err != nil {
		stop()
		n.close()
		return nil, err
	}
	r.drv = churn.New(churn.Config{Socket: n.ipamdSocket(), Rate: o.rate, MinLifetime: o.minLife, MaxLifetime: o.maxLife,
		DropDEL: o.drop, DropFor: o.dropFor, Seed: o.seed, Pods: plannedPods(o), Runtime: criMirror{n.rt}})
	return r, nil
}

// stopIPAMD ends ipamd (once); its datastore and the reconciler's totals
// stay readable.
func (r *run) stopIPAMD() error {
	r.stopAgent()
	if r.agentDone == nil {
		return nil
	}
	err := <-r.agentDone
	r.agentDone = nil
	return err
}

// stop ends ipamd and removes the node.
func (r *run) stop() error {
	err := r.stopIPAMD()
	r.node.close()
	return err
}

// runAll runs every mode's churn at the same time, each on its own node
// with the same seed, printing each run's pool line every o.every, then
// the side-by-side; it returns what each run did.
func runAll(o options, w io.Writer) ([]result, error) {
	fmt.Fprintln(w, header(o))
	var runs []*run
	defer func() {
		for _, r := range runs {
			_ = r.stop()
		}
	}()
	// One node at a time: each sets the SDK's endpoint variables for its
	// own simulator before building its clients.
	for _, mode := range o.modes {
		r, err := startRun(o, mode)
		if err != nil {
			return nil, fmt.Errorf("start the node with POD_IP_RECONCILE_MODE=%s: %w", mode, err)
		}
		runs = append(runs, r)
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() { defer wg.Done(); r.drv.Run(ctx) }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var tick <-chan time.Time
	if o.every > 0 {
		t := time.NewTicker(o.every)
		defer t.Stop()
		tick = t.C
	}
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick:
			for _, r := range runs {
				fmt.Fprintln(w, poolLine(r.mode, time.Since(start), r.measure()))
			}
		}
	}

	// Measured with ipamd stopped, so no pass lands between the counts.
	results := make([]result, len(runs))
	for i, r := range runs {
		if err := r.stopIPAMD(); err != nil {
			return nil, fmt.Errorf("ipamd with POD_IP_RECONCILE_MODE=%s: %w", r.mode, err)
		}
		results[i] = r.measure()
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, sideBySide(o.seed, results))
	return results, nil
}

// plannedPods is how many pod starts each run attempts: one every 1/rate
// seconds from 0, the last one at least one slot before the run ends, so
// every run attempts the same pods whatever the scheduling jitter.
func plannedPods(o options) int {
	return max(int(o.duration.Seconds()*o.rate)-1, 1)
}

// waitForSocket waits until ipamd accepts connections on its socket.
func waitForSocket(path string, limit time.Duration, agentDone <-chan error) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case err := <-agentDone:
			return fmt.Errorf("ipamd stopped before serving: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ipamd not serving on %s after %s: %w", path, limit, err)
		}
	}
}

// measure reads the node and the churn now.
func (r *run) measure() result {
	agent := r.node.agent
	s := agent.Store().Stats()
	c := r.drv.Counters()
	res := result{
		Mode: r.mode, PD: r.o.pd, Planned: plannedPods(r.o),
		Attempted: int(c.Adds), Failed: int(c.AddFailures), LostDELs: int(c.LostDels), Live: int(c.Live),
		FirstFailure: c.FirstFailure, Leaked: leaked(agent, r.drv),
		ENIs: s.ENIs, Prefixes: s.TotalPrefixes, Addresses: s.TotalIPs, Assigned: s.AssignedIPs, Available: s.AvailableIPs(),
		EC2: r.node.sim.Calls(),
	}
	if rs, on := agent.ReconcilerStatus(); on {
		res.ReconcilerRan = true
		res.Reclaimed, res.WouldReclaim = rs.Totals.Reclaimed, rs.Totals.WouldReclaim
	}
	return res
}

// leaked counts allocations held for pods that ended without their DEL.
func leaked(agent *ipamd.Agent, drv *churn.Driver) int {
	n := 0
	for _, a := range agent.Store().Allocations() {
		if drv.Gone(a.Key.ContainerID) {
			n++
		}
	}
	return n
}
