package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CRI is a kubelet-like client of the runtime's CRI (runtime v1).
type CRI struct {
	conn *grpc.ClientConn
	rt   runtimeapi.RuntimeServiceClient
}

// DialCRI connects to the CRI on a unix socket (lazily: errors surface on
// the first call).
func DialCRI(sock string) (*CRI, error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &CRI{conn: conn, rt: runtimeapi.NewRuntimeServiceClient(conn)}, nil
}

// Close closes the connection.
func (c *CRI) Close() { _ = c.conn.Close() }

// Version asks the runtime for its version (a readiness probe).
func (c *CRI) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	return c.rt.Version(ctx, &runtimeapi.VersionRequest{})
}

// PodSpec is what the tests vary between sandboxes.
type PodSpec struct {
	Name, Namespace, UID string
	HostNetwork          bool
	CgroupParent         string
	LogDir               string
	// PID is the sandbox's PID namespace mode; the zero value is POD (a
	// pod-wide namespace, the pause process as PID 1).
	PID runtimeapi.NamespaceMode
	// Annotations are the pod's annotations as the kubelet passes them
	// (PodSandboxConfig.Annotations); a runtime hands them to a CNI plugin
	// whose conflist declares the io.kubernetes.cri.pod-annotations
	// capability.
	Annotations map[string]string
}

// RunPodSandbox creates and starts a sandbox (CNI ADD happens inside) and
// returns its ID.
func (c *CRI) RunPodSandbox(ctx context.Context, p PodSpec) (string, error) {
	netMode := runtimeapi.NamespaceMode_POD
	if p.HostNetwork {
		netMode = runtimeapi.NamespaceMode_NODE
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: p.Name, Namespace: p.Namespace, Uid: p.UID},
		LogDirectory: p.LogDir,
		Annotations:  p.Annotations,
		Labels:       map[string]string{"io.kubernetes.pod.name": p.Name, "io.kubernetes.pod.namespace": p.Namespace, "io.kubernetes.pod.uid": p.UID},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: p.CgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: netMode, Pid: p.PID, Ipc: runtimeapi.NamespaceMode_POD},
			},
		},
	}
	if !p.HostNetwork {
		cfg.Hostname = p.Name // a host-network sandbox keeps the node's UTS namespace
	}
	r, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return "", err
	}
	return r.PodSandboxId, nil
}

// StopPodSandbox stops a sandbox (first CNI DEL).
func (c *CRI) StopPodSandbox(ctx context.Context, id string) error {
	_, err := c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	return err
}

// RemovePodSandbox removes a stopped sandbox (second CNI DEL, no netns).
func (c *CRI) RemovePodSandbox(ctx context.Context, id string) error {
	_, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	return err
}

// ListPodSandbox lists every sandbox the runtime knows, in any state.
func (c *CRI) ListPodSandbox(ctx context.Context) ([]*runtimeapi.PodSandbox, error) {
	r, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, err
	}
	return r.Items, nil
}

// SandboxInfo is what PodSandboxStatus tells about a sandbox's network.
type SandboxInfo struct {
	State runtimeapi.PodSandboxState
	IP    netip.Addr // invalid when the sandbox has none (host network)
	// AdditionalIPs are network.additionalIps (dual stack), as text.
	AdditionalIPs []string
	Netns         string // path of its network namespace
	PID           int
}

// PodSandboxStatus reads a sandbox's state, IP and network namespace path
// (from containerd's verbose info: the runtime spec's network namespace,
// else /proc/<pid>/ns/net).
func (c *CRI) PodSandboxStatus(ctx context.Context, id string) (SandboxInfo, error) {
	r, err := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		return SandboxInfo{}, err
	}
	st := r.GetStatus()
	if st == nil {
		return SandboxInfo{}, errors.New("PodSandboxStatus: no status")
	}
	si := SandboxInfo{State: st.State}
	for _, a := range st.GetNetwork().GetAdditionalIps() {
		si.AdditionalIPs = append(si.AdditionalIPs, a.GetIp())
	}
	if ipText := st.GetNetwork().GetIp(); ipText != "" {
		if si.IP, err = netip.ParseAddr(ipText); err != nil {
			return si, fmt.Errorf("sandbox %s: bad IP %q", id, ipText)
		}
	}
	var info struct {
		PID         int `json:"pid"`
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string } `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if raw, ok := r.Info["info"]; ok && json.Unmarshal([]byte(raw), &info) == nil {
		si.PID = info.PID
		for _, n := range info.RuntimeSpec.Linux.Namespaces {
			if n.Type == "network" && n.Path != "" {
				si.Netns = n.Path
			}
		}
		if si.Netns == "" && info.PID > 0 {
			si.Netns = "/proc/" + strconv.Itoa(info.PID) + "/ns/net"
		}
	}
	return si, nil
}
