package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// kubelet starts and deletes a node's pods the way the kubelet and the CNI
// plugin do: the sandbox exists (not yet listed) while its ADD is in
// flight, a failed ADD is retried after a pause, and a DEL follows the
// pod's deletion. It knows ipamd only by its gRPC socket.
type kubelet struct {
	sock  string
	rt    *fakecri.Runtime
	node  int
	retry time.Duration

	mu   sync.Mutex
	pods []*pod
	wg   sync.WaitGroup
}

// pod is one pod's history.
type pod struct {
	name, id string
	firstADD time.Time // the first ADD was sent
	running  time.Time // an ADD succeeded; zero while not
	failures int       // ADDs that failed before it ran
	lastErr  string
}

func newKubelet(sock string, rt *fakecri.Runtime, node int, retry time.Duration) *kubelet {
	return &kubelet{sock: sock, rt: rt, node: node, retry: retry}
}

// Start creates n pods at once and retries each failed ADD every retry
// until it succeeds or ctx ends. It does not wait.
func (k *kubelet) Start(ctx context.Context, n int) {
	k.mu.Lock()
	base := len(k.pods)
	for i := range n {
		name := fmt.Sprintf("fleet-%04d-%03d", k.node, base+i)
		p := &pod{name: name, id: fmt.Sprintf("%032x%032x", k.node, base+i)}
		k.pods = append(k.pods, p)
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			k.run(ctx, p)
		}()
	}
	k.mu.Unlock()
}

func (k *kubelet) run(ctx context.Context, p *pod) {
	k.rt.Add(fakecri.Sandbox{ID: p.id, Name: p.name, Namespace: "fleet", State: runtimeapi.PodSandboxState_SANDBOX_READY, Hidden: true})
	for {
		now := time.Now()
		k.mu.Lock()
		if p.firstADD.IsZero() {
			p.firstADD = now
		}
		k.mu.Unlock()
		ip, err := k.add(p)
		k.mu.Lock()
		if err == nil {
			p.running = time.Now()
			k.mu.Unlock()
			k.rt.ShowWithIP(p.id, ip)
			return
		}
		p.failures++
		p.lastErr = err.Error()
		k.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(k.retry):
		}
	}
}

func (k *kubelet) add(p *pod) (string, error) {
	conn, err := grpc.NewClient("unix://"+k.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := rpc.NewCNIBackendClient(conn).AddNetwork(ctx, &rpc.AddNetworkRequest{
		K8S_POD_NAME: p.name, K8S_POD_NAMESPACE: "fleet", K8S_POD_INFRA_CONTAINER_ID: p.id,
		Netns: "/var/run/netns/cni-" + p.id[:8], IfName: "eth0", NetworkName: "aws-cni", ContainerID: p.id,
	})
	switch {
	case err != nil:
		return "", err
	case !r.Success || len(r.IPAllocationMetadata) == 0:
		return "", fmt.Errorf("ADD refused")
	}
	return r.IPAllocationMetadata[0].IPv4Addr, nil
}

// DeleteAll sends a DEL for every pod (running or not), as the kubelet
// does when pods are deleted, and removes their sandboxes.
func (k *kubelet) DeleteAll() {
	k.wg.Wait()
	k.mu.Lock()
	pods := append([]*pod(nil), k.pods...)
	k.mu.Unlock()
	for _, p := range pods {
		conn, err := grpc.NewClient("unix://"+k.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, _ = rpc.NewCNIBackendClient(conn).DelNetwork(ctx, &rpc.DelNetworkRequest{
				K8S_POD_NAME: p.name, K8S_POD_NAMESPACE: "fleet", K8S_POD_INFRA_CONTAINER_ID: p.id,
				Reason: "PodDeleted", IfName: "eth0", NetworkName: "aws-cni", ContainerID: p.id,
			})
			cancel()
			conn.Close()
		}
		k.rt.Remove(p.id)
	}
}

// Snapshot copies the pods' histories.
func (k *kubelet) Snapshot() []pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]pod, len(k.pods))
	for i, p := range k.pods {
		out[i] = *p
	}
	return out
}
