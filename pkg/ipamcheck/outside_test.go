package ipamcheck

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
)

// statuses is a runtime's word on sandboxes by ID; asked records who was
// asked.
type statuses struct {
	by    map[string]cri.SandboxStatus
	asked []string
}

func (s *statuses) SandboxStatus(_ context.Context, id string) (cri.SandboxStatus, error) {
	s.asked = append(s.asked, id)
	if st, ok := s.by[id]; ok {
		return st, nil
	}
	return cri.SandboxStatus{}, errors.New("not found")
}

// Only READY sandboxes that hold no allocation are asked for their IPs;
// one that cannot be described is left out.
func TestOnlyReadySandboxesWithoutAnAllocationAreAsked(t *testing.T) {
	rt := &statuses{by: map[string]cri.SandboxStatus{
		"branch": {Sandbox: cri.Sandbox{ID: "branch", Ready: true}, IP: "10.0.40.7"},
	}}
	list := []cri.Sandbox{{ID: "branch", Ready: true}, {ID: "regular", Ready: true}, {ID: "stopped", Ready: false}, {ID: "gone", Ready: true}}
	got := unheldStatuses(context.Background(), rt, list, []podip.AllocationStatus{{ContainerID: "regular", IP: "10.0.1.3"}})
	assert.Equal(t, []string{"branch", "gone"}, rt.asked)
	require.Len(t, got, 1)
	assert.Equal(t, "10.0.40.7", got[0].IP)
}

// A branch ENI pod's address is shown outside the pool, with its pod; an
// address inside the pool, or none, is no such row; none of them is a
// leak or counts among the pool's addresses.
func TestABranchPodIsShownOutsideThePoolNeverAsALeak(t *testing.T) {
	now := t0.Add(time.Hour)
	enis := datastore.ENIInfos{ENIs: map[string]datastore.ENIView{"eni-z": eniWith("eni-z", 0, "10.0.1.0/28")}}
	st := podip.Status{Allocations: []podip.AllocationStatus{{IP: "10.0.1.3", ENI: "eni-z", ContainerID: "c3", AssignedAt: t0}}}
	sandbox := func(id, name string) cri.Sandbox {
		return cri.Sandbox{ID: id, Name: name, Namespace: "shop", Ready: true, CreatedAt: now.Add(-90 * time.Second)}
	}
	base := Input{Now: now, Sandboxes: []cri.Sandbox{{ID: "c3"}}, ENIs: enis, Reconciler: st, Grace: grace}
	without := Classify(base)
	in := base
	in.Others = []cri.SandboxStatus{
		{Sandbox: sandbox("sb-db", "db-0"), IP: "10.0.40.7"},
		{Sandbox: sandbox("sb-v6", "db-1"), IP: "2600:1f14:aa::7"},
		{Sandbox: sandbox("sb-free", "odd"), IP: "10.0.1.9"}, // in the pool: not this row's business
		{Sandbox: sandbox("sb-host", "host")},                // no IP (host network)
	}
	res := Classify(in)

	var outside []Row
	for _, r := range res.Addresses {
		if r.Verdict == OutsidePool {
			outside = append(outside, r)
		}
	}
	require.Len(t, outside, 2)
	assert.Equal(t, Row{Address: "10.0.40.7", Verdict: OutsidePool, PodNamespace: "shop", PodName: "db-0", ContainerID: "sb-db",
		AgeSeconds: 90, order: outsideOrder}, outside[0])
	assert.Equal(t, "2600:1f14:aa::7", outside[1].Address)
	assert.Equal(t, OutsidePool, res.Addresses[len(res.Addresses)-1].Verdict, "after every ENI's rows")
	assert.Equal(t, 2, res.Summary.OutsidePool)
	want := without.Summary
	want.OutsidePool = 2
	assert.Equal(t, want, res.Summary, "the pool's counts do not change")
	assert.Zero(t, res.Summary.ConfirmedLeaks)
}

// The table says what such a row is, and the summary counts them.
func TestTheTableNamesBranchPods(t *testing.T) {
	rep := Report{Reconciler: ReconcilerInfo{Mode: "enforce", GracePeriod: "5m0s"}, Sandboxes: 3, RuntimeEndpoint: "/run/containerd/containerd.sock",
		Addresses: []Row{{Address: "10.0.40.7", Verdict: OutsidePool, PodNamespace: "shop", PodName: "db-0", ContainerID: "sb-db", AgeSeconds: 90}},
		Summary:   Summary{ENIs: 1, Addresses: 16, Unassigned: 16, OutsidePool: 1}}
	var b strings.Builder
	require.NoError(t, writeTable(&b, rep))
	assert.Regexp(t, `(?m)^10\.0\.40\.7 +- +shop/db-0 +sb-db +1m30s +outside ipamd's pool: a branch ENI pod \(security groups for pods\) or a pod another plugin networked; ipamd never frees or counts it$`, b.String())
	assert.Contains(t, b.String(), "16 unassigned, 1 pod address outside ipamd's pool (branch ENI pods or another plugin's); reconciler enforce mode")
}
