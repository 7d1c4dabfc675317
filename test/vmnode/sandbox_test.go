package vmnode

import (
	"context"
	"encoding/json"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podMeta names a pod as the kubelet does in the sandbox's metadata and
// labels; containerd passes them to the plugin in CNI_ARGS.
type podMeta struct{ name, namespace, uid string }

// runSandbox is the kubelet's RunPodSandbox for a pod network pod.
func (n *node) runSandbox(ctx context.Context, p podMeta) (string, error) {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: p.name, Namespace: p.namespace, Uid: p.uid},
		Hostname: p.name,
		Labels:   map[string]string{"io.kubernetes.pod.name": p.name, "io.kubernetes.pod.namespace": p.namespace, "io.kubernetes.pod.uid": p.uid},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/kubepods",
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD},
			},
		},
	}
	r, err := n.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return "", err
	}
	return r.PodSandboxId, nil
}

// sandboxNet is what PodSandboxStatus says of a sandbox's network: its
// IP and the path of its network namespace (from containerd's verbose
// info: the runtime spec's network namespace).
func (n *node) sandboxNet(ctx context.Context, id string) (ip, netns string, err error) {
	r, err := n.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		return "", "", err
	}
	ip = r.GetStatus().GetNetwork().GetIp()
	var info struct {
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string } `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(r.Info["info"]), &info); err != nil {
		return ip, "", fmt.Errorf("sandbox %s's verbose info: %w", id, err)
	}
	for _, ns := range info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			return ip, ns.Path, nil
		}
	}
	return ip, "", fmt.Errorf("sandbox %s: no network namespace path in its runtime spec", id)
}

// removeSandbox is the kubelet's StopPodSandbox (CNI DEL with the
// namespace) then RemovePodSandbox.
func (n *node) removeSandbox(ctx context.Context, id string) error {
	if _, err := n.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("StopPodSandbox: %w", err)
	}
	if _, err := n.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("RemovePodSandbox: %w", err)
	}
	return nil
}
