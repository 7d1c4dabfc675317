package kubenode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// kubeletConfig is the KubeletConfiguration that runs in a box (the
// recipe of docs/testing.md): cgroupfs with the node's cgroup tree as its
// root, no kernel-default checks (the host's sysctls are not the node's to
// set), image and eviction thresholds that never fire on a test machine,
// no authentication or authorization of its own API (nothing outside the
// node reaches it), the runtime at its default socket.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupsPerQOS: true
cgroupRoot: /{{cgroup}}
enforceNodeAllocatable: ["pods"]
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
protectKernelDefaults: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1%"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
containerRuntimeEndpoint: unix://{{sock}}
maxPods: {{maxPods}}
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
clusterDomain: cluster.local
resolvConf: ""
serializeImagePulls: false
registerNode: true
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
fileCheckFrequency: 60s
`

// Kubelet is the node's kubelet.
type Kubelet struct {
	box  *Box
	bin  string
	args []string
	cmd  *exec.Cmd
}

// StartKubelet writes the kubelet's config and kubeconfig and starts it
// on the runtime at sock (inside the node); it registers the node as name with nodeIP.
func StartKubelet(box *Box, bin, sock string, kubeconfig []byte, name, nodeIP string, maxPods int) (*Kubelet, error) {
	cfg := strings.NewReplacer("{{cgroup}}", box.Cgroup, "{{sock}}", sock,
		"{{maxPods}}", fmt.Sprint(maxPods)).Replace(kubeletConfig)
	cfgPath, kcPath := filepath.Join(box.Dir, "kubelet.yaml"), filepath.Join(box.Dir, "kubelet.kubeconfig")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	k := &Kubelet{box: box, bin: bin, args: []string{"--config=" + cfgPath, "--kubeconfig=" + kcPath,
		"--hostname-override=" + name, "--node-ip=" + nodeIP, "--v=1"}}
	return k, k.Start()
}

// Start runs the kubelet (again, after Stop).
func (k *Kubelet) Start() error {
	cmd, err := k.box.Start("kubelet.log", k.bin, k.args...)
	k.cmd = cmd
	return err
}

// Stop ends the kubelet (SIGTERM); pods keep running, as when systemd
// restarts it.
func (k *Kubelet) Stop() { stopCmd(k.cmd); k.cmd = nil }

// kill ends the kubelet at once (SIGKILL), as a crash does.
func (k *Kubelet) kill() { killCmd(k.cmd); k.cmd = nil }

// kubeProxyConfig runs kube-proxy in the node in iptables or nftables
// mode, leaving the conntrack sysctls alone (the table size is host-wide).
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {{kubeconfig}}
hostnameOverride: {{name}}
mode: {{mode}}
clusterCIDR: {{clusterCIDR}}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`

// StartKubeProxy starts kube-proxy in mode ("iptables" or "nftables").
func StartKubeProxy(box *Box, bin string, kubeconfig []byte, name, mode, clusterCIDR string) (*exec.Cmd, error) {
	kc, cfgPath := filepath.Join(box.Dir, "kube-proxy.kubeconfig"), filepath.Join(box.Dir, "kube-proxy.yaml")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	cfg := strings.NewReplacer("{{kubeconfig}}", kc, "{{name}}", name, "{{mode}}", mode,
		"{{clusterCIDR}}", clusterCIDR).Replace(kubeProxyConfig)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return box.Start("kube-proxy.log", bin, "--config="+cfgPath, "--v=1")
}

// killCmd SIGKILLs a node process and reaps it.
func killCmd(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// stopCmd ends a node process: SIGTERM, SIGKILL after 15 s.
func stopCmd(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
