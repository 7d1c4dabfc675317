// Package kubenode runs a real single-node Kubernetes for tests: a node in
// a box. The control plane (test/apiserver in cluster mode, with
// kube-controller-manager and kube-scheduler) runs on the host's loopback;
// the node has its own network namespace (e2e's node network, the
// simulator's ENIs as links), mount namespace and cgroup tree, in which
// the container runtime (containerd 2.x or 1.6, or CRI-O), the kubelet and
// kube-proxy run (box.go). The project's Helm chart deploys the aws-node
// DaemonSet onto it from images built the way users get them (`make
// image`, offline, on a base made from this host's own iptables and
// libraries: image.go). The scenario tests drive pods through the API
// server and make faults for real (faults.go); docs/testing.md, "A real
// node", describes the whole and lists the scenarios.
package kubenode
