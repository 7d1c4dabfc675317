// Package helmtest checks the aws-vpc-cni Helm chart (charts/aws-vpc-cni)
// with the Helm library: it renders the chart with the default values and
// with the values files under testdata/, decodes every object strictly into
// the Kubernetes API types, checks the DaemonSet, RBAC and other objects
// against the facts the chart must keep, runs helm lint, and fails when
// config/master/aws-k8s-cni.yaml is not what `make generate-config` writes.
package helmtest
