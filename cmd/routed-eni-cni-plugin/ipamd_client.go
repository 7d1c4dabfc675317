package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
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

// ipamdClient is one connection to ipamd's unix socket.
type ipamdClient struct {
	conn *grpc.ClientConn
}

// dialIPAMD prepares a connection; nothing is sent until the first call,
// where an absent socket surfaces as codes.Unavailable.
func dialIPAMD(socket string) (*ipamdClient, error) {
	conn, err := grpc.NewClient("unix:"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("ipamd client for %s: %w", socket, err)
	}
	return &ipamdClient{conn: conn}, nil
}

func (c *ipamdClient) Close() { _ = c.conn.Close() }

func (c *ipamdClient) addNetwork(req *rpc.AddNetworkRequest) (*rpc.AddNetworkReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), addTimeout)
	defer cancel()
	req.ClientVersion = version.RPCVersion
	return rpc.NewCNIBackendClient(c.conn).AddNetwork(ctx, req)
}

func (c *ipamdClient) delNetwork(req *rpc.DelNetworkRequest) (*rpc.DelNetworkReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), delTimeout)
	defer cancel()
	req.ClientVersion = version.RPCVersion
	return rpc.NewCNIBackendClient(c.conn).DelNetwork(ctx, req)
}

func (c *ipamdClient) poolStatus() (*rpc.PoolStatusReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	return rpc.NewCNIMaintenanceClient(c.conn).PoolStatus(ctx, &rpc.PoolStatusRequest{ClientVersion: version.RPCVersion})
}

func (c *ipamdClient) garbageCollect(req *rpc.GarbageCollectRequest) (*rpc.GarbageCollectReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), gcTimeout)
	defer cancel()
	req.ClientVersion = version.RPCVersion
	return rpc.NewCNIMaintenanceClient(c.conn).GarbageCollect(ctx, req)
}

// health asks the standard gRPC health service about the whole server
// (service ""), as upstream's probe does.
func (c *ipamdClient) health() (healthpb.HealthCheckResponse_ServingStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	r, err := healthpb.NewHealthClient(c.conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN, err
	}
	return r.GetStatus(), nil
}

// isUnknownPod reports ipamd's "nothing held for this key" DEL answer.
func isUnknownPod(err error) bool {
	return err != nil && strings.Contains(err.Error(), unknownPodText)
}

// isUnreachable reports errors that mean ipamd did not answer at all.
func isUnreachable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}

func isUnimplemented(err error) bool { return status.Code(err) == codes.Unimplemented }
