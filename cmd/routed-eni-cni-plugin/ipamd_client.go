package main

import (
	"strings"
	"time"

	rpc "github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/ipamdwire"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
)

// Deadlines of the calls to ipamd. DEL is short so an absent ipamd never
// holds up pod deletion; ADD may wait for the pool to grow.
const (
	addTimeout    = 60 * time.Second
	delTimeout    = 5 * time.Second
	statusTimeout = 5 * time.Second
	gcTimeout     = 30 * time.Second
)

// unknownPodText is what ipamd's DelNetwork error says when it holds
// nothing for the key (upstream's contract).
const unknownPodText = "datastore: unknown pod"

// ipamdClient calls ipamd's gRPC API on its unix socket (package
// ipamdwire: each call its own connection).
type ipamdClient struct {
	c rpc.Client
}

// newIPAMDClient returns a client of the socket; nothing is sent until the
// first call, where an absent socket surfaces as rpc.Unavailable.
func newIPAMDClient(socket string) *ipamdClient {
	return &ipamdClient{c: rpc.Client{Socket: socket}}
}

func (c *ipamdClient) addNetwork(req *rpc.AddNetworkRequest) (*rpc.AddNetworkReply, error) {
	req.ClientVersion = version.RPCVersion
	return c.c.AddNetwork(req, addTimeout)
}

func (c *ipamdClient) delNetwork(req *rpc.DelNetworkRequest) (*rpc.DelNetworkReply, error) {
	req.ClientVersion = version.RPCVersion
	return c.c.DelNetwork(req, delTimeout)
}

func (c *ipamdClient) poolStatus() (*rpc.PoolStatusReply, error) {
	return c.c.PoolStatus(&rpc.PoolStatusRequest{ClientVersion: version.RPCVersion}, statusTimeout)
}

func (c *ipamdClient) garbageCollect(req *rpc.GarbageCollectRequest) (*rpc.GarbageCollectReply, error) {
	req.ClientVersion = version.RPCVersion
	return c.c.GarbageCollect(req, gcTimeout)
}

// health asks the standard gRPC health service about the whole server
// (service ""), as upstream's probe does.
func (c *ipamdClient) health() (rpc.HealthStatus, error) {
	return c.c.Health("", statusTimeout)
}

// isUnknownPod reports ipamd's "nothing held for this key" DEL answer.
func isUnknownPod(err error) bool {
	return err != nil && strings.Contains(err.Error(), unknownPodText)
}

// isUnreachable reports errors that mean ipamd did not answer at all.
func isUnreachable(err error) bool {
	switch rpc.CodeOf(err) {
	case rpc.Unavailable, rpc.DeadlineExceeded, rpc.Canceled:
		return true
	}
	return false
}

func isUnimplemented(err error) bool { return rpc.CodeOf(err) == rpc.Unimplemented }
