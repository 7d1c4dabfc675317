// Package e2e runs the node agent end to end on a real container runtime:
// containerd (or CRI-O) and runc inside a network namespace that plays the
// node, the aws-cni plugin (and the loopback and egress-cni plugins) as the
// runtime's CNI, the real aws-k8s-agent (ipamd) binary as a subprocess, and the
// EC2/IMDS simulator (pkg/sim/ec2sim) standing in for AWS. Pods are created
// and deleted through the CRI exactly as a kubelet would.
//
// The runtime is chosen with E2E_RUNTIME (runtime.go, the Runtime
// interface): "containerd" (default) is Debian's containerd 1.6 with ctr,
// containerd-shim-runc-v2 and runc on PATH (CI installs them through
// .ci/run); "containerd2" is containerd 2.2.9 and "crio" CRI-O 1.34.0 from
// E2E_COMPONENTS_DIR, default /var/cache/aws-vpc-cni-e2e
// (scripts/ci/components.sh installs them there; CRI-O also needs
// Debian's conmon and skopeo, and its pods use per-container PID
// namespaces, see crio.go). Each test logs the runtime and version it runs
// on. The tests need root, and an IPv6 node iptables too; without them, or
// without the default runtime, the tests skip with the reason; a runtime
// selected by E2E_RUNTIME that is missing fails them. Nothing touches the
// host's network: the node, its upstream and every pod live in namespaces
// the tests create, and all processes, sockets, mounts and cgroups the
// tests cause are removed at the end.
//
// A run that times out or is killed cleans up too. The runtime and the
// agent are started through test/spawn (own process group, SIGKILL when
// the test binary dies), so they die with it. What outlives it (shims and
// conmons re-parent, containers, mounts, network namespaces, cgroups) the
// next run removes: every test binary records what it creates in the
// registry (registry.go), RegistryDir = /run/aws-vpc-cni-e2e/<pid>/ (a
// "start" file and "entries", one "kind path" a line: node and build
// directories, network namespace bind mounts, containerd sockets, runc
// roots, cgroups), and TestMain sweeps (sweep.go) before the tests the
// entries of processes that no longer run: it kills processes whose
// command line names a recorded directory or socket, or whose working
// directory is in one, and the members of recorded cgroups; force-deletes
// the containers of recorded runc roots; removes the shim sockets of
// recorded containerd sockets, the recorded network namespaces (and those
// the deleted containers joined), every mount below a recorded directory,
// the recorded cgroup trees and then the directories (kept with
// E2E_KEEP), and finally the entry, logging one line
// ("e2e: sweep: an earlier run ... (pid N) left 37 processes, ...").
// After the tests it sweeps this run's own entry, logging only if the
// teardowns left something. The sweep touches only what an entry names
// (a path a running process's entry also names is left alone), never the
// host's own network or containers; a shell whose working directory is
// in a killed run's node directory is taken for part of that run.
//
// Layout of one node (Node, harness.go):
//
//	upstream netns  <-veth->  node netns (eth0 = the primary ENI's address and MAC)
//	  v<mac> (router  <-veth->    eth<device>: each further attached ENI, with
//	  address /32)                its MAC, made and removed by the simulator as
//	                              attachments complete (pkg/sim/nodelinks);
//	                              eth<card>-<device> on network cards above 0
//	                            runtime (own root, state, runc root; its socket
//	                              alone in a directory, cri/containerd.sock; CRI-O:
//	                              crio/crio.sock)
//	                            aws-k8s-agent (host networking on: it sets up the
//	                              ENI links, tables, rules and iptables of this
//	                              namespace; private mount namespace, see ipamd.go;
//	                              the socket directory mounted read-only at
//	                              /run/containerd, CRI-O /var/run/crio, as the Helm
//	                              chart mounts it)
//	                            EC2 + IMDS simulator (in this process, listening
//	                              inside the node netns) and a forwarder to the
//	                              suite's kube-apiserver (Kube, kube_node.go)
//	                            pod netns ... (veths made by aws-cni)
//
// Kubernetes (kube.go): one real kube-apiserver on etcd (test/apiserver,
// the pinned versions of test/components) serves the whole test binary,
// started by the first node that needs one and stopped by TestMain. The
// chart, rendered with its defaults, is applied to it (the ENIConfig CRD,
// the aws-node service account, its ClusterRole and binding), and each
// node's agent authenticates with a TokenRequest token of that service
// account, so a call the chart's role lacks is refused as in a cluster.
// The agent reaches the server through a forwarder listening inside the
// node's namespace; it is also where the faults a real server cannot
// produce for one node are made (APIFault: refuse, black-hole).
//
// An IPv6 node (Options.IPv6, TestIPv6) adds the primary ENI's IPv6 address
// on eth0, the upstream as its IPv6 default gateway with a route back to
// each delegated /80, and egress-cni (with host-local and iptables) giving
// pods IPv4 egress SNATed to the node's IPv4 address.
//
// The scenarios are in the *_test.go files; TestSoak runs only when
// E2E_SOAK_DURATION is set (make soak DURATION=10m). E2E_KEEP=1 keeps each
// node's directory (agent, plugin and runtime logs) after the test.
package e2e
