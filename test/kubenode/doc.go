// Package kubenode runs a real single-node Kubernetes (a node in a box) for
// tests: a kubelet and its container runtime (containerd or CRI-O) in
// their own network and mount namespaces, onto which the project's Helm chart deploys the aws-node
// DaemonSet from images built here the way users get them (`make image`,
// offline, on a base made from this host's own iptables and libraries).
package kubenode
