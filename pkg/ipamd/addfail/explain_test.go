package addfail

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var now = time.Date(2026, 12, 2, 10, 40, 0, 0, time.UTC)

func TestExplain(t *testing.T) {
	capacity := Capacity{InstanceType: "m5.large", ENIs: 3, SlotsPerENI: 9, MaxAddresses: 27}
	full := State{Now: now, Total: 27, Assigned: 27, MaxPods: 29, Capacity: capacity, Cooldown: 30 * time.Second}
	with := func(s State, f func(*State)) State { f(&s); return s }
	for _, c := range []struct {
		name string
		s    State
		want string
	}{
		{"cooling", with(full, func(s *State) { s.Assigned, s.Cooling, s.CoolingFreeAt = 25, 2, now.Add(11500*time.Millisecond) }),
			"cooling_down: released addresses are cooling down (2 cooling, IP_COOLDOWN_PERIOD 30s, 25 of 27 addresses assigned); the first is free in 12s (at 10:40:11Z)"},
		{"cooling, time unknown", with(full, func(s *State) { s.Assigned, s.Cooling = 26, 1 }),
			"cooling_down: released addresses are cooling down (1 cooling, IP_COOLDOWN_PERIOD 30s, 26 of 27 addresses assigned); it is free as soon as its cooldown ends"},
		{"pending", State{Now: now, Total: 19, Assigned: 9, Pending: 10, MaxPods: 29, Capacity: capacity,
			PendingWhy: "the runtime did not answer: connection refused", PendingCheckAt: now.Add(5 * time.Second)},
			"awaiting_runtime_check: new addresses wait for the check against the container runtime (10 waiting: the runtime did not answer: connection refused; 9 of 19 addresses assigned); they are checked again in 5s (at 10:40:05Z)"},
		{"pending outnumber cooling", State{Now: now, Total: 19, Assigned: 9, Pending: 8, Cooling: 2},
			"awaiting_runtime_check: new addresses wait for the check against the container runtime (8 waiting: not checked yet; 9 of 19 addresses assigned); they are checked at the next pool step"},
		{"max pods", State{Now: now, Total: 30, Assigned: 29, MaxPods: 29, Capacity: Capacity{MaxAddresses: 100}},
			"max_pods: the node is at max pods (max pods 29, 29 of 30 addresses assigned); an address frees when a pod on the node is deleted"},
		{"capacity", full,
			"instance_capacity: the pool is at the instance's address capacity (m5.large: 3 ENIs x 9 addresses, 27 addresses for pods, 27 of 27 addresses assigned); an address frees when a pod on the node is deleted"},
		{"capacity, prefixes", with(full, func(s *State) {
			s.Capacity = Capacity{InstanceType: "m5.large", ENIs: 3, SlotsPerENI: 9, Prefixes: true, MaxAddresses: 432}
			s.Total, s.Assigned, s.MaxPods = 432, 432, 0
		}),
			"instance_capacity: the pool is at the instance's address capacity (m5.large: 3 ENIs x 9 /28 prefixes, 432 addresses for pods, 432 of 432 addresses assigned); an address frees when a pod on the node is deleted"},
		{"leaks at capacity", with(full, func(s *State) {
			s.Leaks = Leaks{Candidates: 3, Confirmed: 1, NextReclaim: now.Add(25 * time.Second)}
		}),
			"leak_candidates: the pool is full and allocations are leak candidates (m5.large: 3 ENIs x 9 addresses, 27 addresses for pods, 27 of 27 addresses assigned; 3 of them without a sandbox in the runtime, 1 confirmed by sandbox ID); the next can be reclaimed in 25s (at 10:40:25Z)"},
		{"leaks at max pods, next pass unknown", State{Now: now, Total: 30, Assigned: 29, MaxPods: 29, Leaks: Leaks{Candidates: 2}},
			"leak_candidates: the pool is full and allocations are leak candidates (max pods 29, 29 of 30 addresses assigned; 2 of them without a sandbox in the runtime, 0 confirmed by sandbox ID); the next can be reclaimed at the reconciler's next pass"},
		{"leaks, report mode", State{Now: now, Total: 29, Assigned: 29, MaxPods: 29, Leaks: Leaks{Candidates: 2, Confirmed: 2, ReportOnly: true, NextReclaim: now}},
			"leak_candidates: the pool is full and allocations are leak candidates (max pods 29, 29 of 29 addresses assigned; 2 of them without a sandbox in the runtime, 2 confirmed by sandbox ID); POD_IP_RECONCILE_MODE=report: the reconciler reports them and frees none"},
		{"provisioning disabled", State{Now: now, Total: 9, Assigned: 9, MaxPods: 29, Growth: Growth{Disabled: true}},
			"provisioning_disabled: ipamd does not grow the pool (DISABLE_NETWORK_RESOURCE_PROVISIONING=true, 9 of 9 addresses assigned); addresses come only from ENIs attached by others"},
		{"unschedulable", State{Now: now, Total: 9, Assigned: 9, Growth: Growth{Unschedulable: true}},
			"node_unschedulable: pool growth is paused while the node is unschedulable (AWS_MANAGE_ENIS_NON_SCHEDULABLE=false, 9 of 9 addresses assigned); growth resumes when the node is schedulable"},
		{"subnet", State{Now: now, Total: 9, Assigned: 9, Growth: Growth{Subnet: "subnet-0a1", SubnetFree: 0,
			SubnetFreeAt: now.Add(-3 * time.Minute), SubnetPausedUntil: now.Add(110 * time.Second)}},
			"subnet_exhausted: the subnet has no free addresses (subnet-0a1, 0 free at DescribeSubnets 3m0s ago, 9 of 9 addresses assigned); growth is retried in 1m50s (at 10:41:50Z)"},
		{"subnet, count unknown", State{Now: now, Total: 9, Assigned: 9, Growth: Growth{SubnetFree: -1, SubnetPausedUntil: now.Add(time.Minute)}},
			"subnet_exhausted: the subnet has no free addresses (the node's subnet, free count not known, 9 of 9 addresses assigned); growth is retried in 1m0s (at 10:41:00Z)"},
		{"subnet pause over", State{Now: now, Total: 9, Assigned: 9, Growth: Growth{SubnetFree: -1, SubnetPausedUntil: now.Add(-time.Second)}},
			"pool_growing: the pool is growing (9 of 9 addresses assigned); the pool grows at its next step"},
		{"throttled", State{Now: now, Total: 9, Assigned: 9, Growth: Growth{ThrottledUntil: now.Add(4 * time.Second)}},
			"ec2_throttled: EC2 is throttling ipamd's requests (RequestLimitExceeded on pool growth, 9 of 9 addresses assigned); growth is retried in 4s (at 10:40:04Z)"},
		{"eniconfig", State{Now: now, Total: 9, Assigned: 9, Growth: Growth{PlacementError: "ENIConfig \"us-west-2a\" not found\n"}},
			"eniconfig_error: custom networking cannot place a new ENI (ENIConfig \"us-west-2a\" not found); retried at every pool step"},
		{"attaching", State{Now: now, Total: 9, Assigned: 9, Growth: Growth{AttachingSince: now.Add(-2 * time.Second)}},
			"pool_growing: the pool is growing (ENI attach in progress since 10:39:58Z (2s ago), 9 of 9 addresses assigned); the runtime retries the ADD"},
		{"assigning", State{Now: now, Total: 0, Assigned: 0, Growth: Growth{AssigningSince: now.Add(-300 * time.Millisecond), AssigningENI: "eni-1"}},
			"pool_growing: the pool is growing (addresses requested for eni-1 since 10:39:59Z (just now), 0 of 0 addresses assigned); the runtime retries the ADD"},
		{"next step", State{Now: now, Total: 9, Assigned: 9, Growth: Growth{NextStep: now.Add(800 * time.Millisecond), LastError: "InvalidParameterValue: boom"}},
			"pool_growing: the pool is growing (9 of 9 addresses assigned; last growth failure: InvalidParameterValue: boom); the pool grows at its next step, in 1s (at 10:40:00Z)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Explain(c.s)
			assert.Equal(t, c.want, got.Line)
			assert.True(t, strings.HasPrefix(got.Line, string(got.Reason)+": "), "the line starts with its reason")
			assert.NotContains(t, got.Line, "\n")
		})
	}
}

func TestFailed(t *testing.T) {
	got := Failed(errors.New("checkpoint: write /var/run/aws-node/ipam.json:\n no space left on device"))
	assert.Equal(t, DatastoreError, got.Reason)
	assert.Equal(t, "datastore_error: ipamd could not record the assignment (checkpoint: write /var/run/aws-node/ipam.json: no space left on device); nothing was assigned; the runtime retries the ADD", got.Line)
}

func TestReasonsAreDistinct(t *testing.T) {
	seen := map[Reason]bool{}
	for _, r := range Reasons {
		assert.False(t, seen[r], r)
		seen[r] = true
		assert.Regexp(t, `^[a-z0-9_]+$`, string(r))
	}
	assert.Len(t, seen, 12)
}
