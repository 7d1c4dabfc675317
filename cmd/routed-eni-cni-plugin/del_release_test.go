package main

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// scriptedIPAMD answers every DelNetwork with reply and err, and counts
// the calls.
type scriptedIPAMD struct {
	rpc.UnimplementedCNIBackendServer
	reply *rpc.DelNetworkReply
	err   error
	calls atomic.Int32
}

func (s *scriptedIPAMD) DelNetwork(context.Context, *rpc.DelNetworkRequest) (*rpc.DelNetworkReply, error) {
	s.calls.Add(1)
	return s.reply, s.err
}

// branchPrevResult is what upstream's plugin returned for a branch-ENI
// pod on VLAN 7 with 10.0.9.9.
func branchPrevResult(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{"cniVersion":"1.1.0","interfaces":[{"name":"vlan1"},{"name":"eth0","sandbox":"/x","mac":"0"},
		{"name":"`+dummyIfName("default", "web")+`","mac":"7"}],"ips":[{"interface":1,"address":"10.0.9.9/32"}]}`), &m))
	return m
}

// What a DEL finds at ipamd, each outcome in turn, run in-process (no
// privileges: release stops before the node-side teardown).
func TestDelReleaseOutcomes(t *testing.T) {
	for _, c := range []struct {
		name        string
		ipamd       *scriptedIPAMD // nil: no ipamd on the socket
		prev        bool           // a branch-ENI pod's prevResult
		want        releaseResult
		wantErr     string
		wantCalls   int32
		queuedUnder string // the queued DEL's reason starts with it; empty: nothing queued
	}{
		{
			name: "released", wantCalls: 1,
			ipamd: &scriptedIPAMD{reply: &rpc.DelNetworkReply{Success: true, IPAllocationMetadata: []*rpc.IPAllocationMetadata{
				{IPv4Addr: "10.0.0.5"}, {IPv4Addr: "not an address"}}}},
			want: releaseResult{outcome: released, released: []attachment{{IP: net.IPv4(10, 0, 0, 5).To4(), RouteTable: 254, IfName: "eth0"}}},
		},
		{
			name: "refused", wantCalls: 1,
			ipamd:   &scriptedIPAMD{reply: &rpc.DelNetworkReply{}},
			wantErr: "ipamd could not release the pod's address",
		},
		{
			name: "branch-ENI pod by ipamd's reply", wantCalls: 1,
			ipamd: &scriptedIPAMD{reply: &rpc.DelNetworkReply{Success: true, PodVlanId: 3,
				IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: "10.0.0.6"}}}},
			want: releaseResult{outcome: branchPod, vlan: 3, ips: []net.IP{net.IPv4(10, 0, 0, 6).To4()}},
		},
		{
			name: "branch-ENI pod by prevResult: ipamd is not asked", prev: true,
			ipamd: &scriptedIPAMD{reply: &rpc.DelNetworkReply{Success: true}},
			want:  releaseResult{outcome: branchPod, vlan: 7, ips: []net.IP{net.IPv4(10, 0, 9, 9).To4()}},
		},
		{
			name: "already released", wantCalls: 1,
			ipamd: &scriptedIPAMD{err: status.Error(codes.Unknown, "datastore: unknown pod")},
			want:  releaseResult{outcome: alreadyReleased},
		},
		{
			// ENABLE_POD_ENI: the pod is gone from the API server and ipamd
			// held nothing, upstream's Success with no addresses.
			name: "success naming no address is already released", wantCalls: 1,
			ipamd: &scriptedIPAMD{reply: &rpc.DelNetworkReply{Success: true}},
			want:  releaseResult{outcome: alreadyReleased},
		},
		{
			name: "ipamd error", wantCalls: 1,
			ipamd:       &scriptedIPAMD{err: status.Error(codes.Internal, "checkpoint write failed")},
			want:        releaseResult{outcome: queued},
			queuedUnder: "ipamd error: ",
		},
		{
			name:        "ipamd unreachable",
			want:        releaseResult{outcome: queued},
			queuedUnder: "ipamd unreachable: ",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "absent.sock")
			if c.ipamd != nil {
				sock, _ = backendOnlyIPAMD(t, c.ipamd)
			}
			extra := map[string]any{}
			if c.prev {
				extra["prevResult"] = branchPrevResult(t)
			}
			args, _ := verbConf(t, sock, extra)
			args.ContainerID, args.IfName = "c1", "eth0"
			args.Args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web"
			inv := startDel(t, args)

			got, err := inv.release(inv.prevInfo())
			if c.wantErr != "" {
				require.EqualError(t, err, c.wantErr)
			} else {
				require.NoError(t, err)
				assert.Equal(t, c.want, got)
			}
			if c.ipamd != nil {
				assert.Equal(t, c.wantCalls, c.ipamd.calls.Load())
			}
			entries, bad := delqueue.List(inv.conf.DelQueueDir)
			require.Empty(t, bad)
			if c.queuedUnder == "" {
				assert.Empty(t, entries, "nothing queued")
				return
			}
			require.Len(t, entries, 1)
			assert.Equal(t, "c1", entries[0].ContainerID)
			assert.Equal(t, "web", entries[0].PodName)
			assert.True(t, strings.HasPrefix(entries[0].Reason, c.queuedUnder), "reason %q", entries[0].Reason)
		})
	}
}

// startDel is the DEL invocation of args, its log closed at the end of t.
func startDel(t *testing.T, args *skel.CmdArgs) *invocation {
	t.Helper()
	inv, done, err := start("DEL", args, false)
	require.NoError(t, err)
	t.Cleanup(done)
	return inv
}
