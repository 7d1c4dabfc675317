// Package eniconfig owns choosing and reading the node's ENIConfig, the
// cluster-scoped object (crd.k8s.amazonaws.com/v1alpha1, kind ENIConfig)
// that custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true) takes
// the subnet and security groups of each new secondary ENI from.
//
// Name picks the object's name from the node's labels and annotations, in
// upstream's order; it is pure. Reader gets the node and then the object
// with plain GETs (no informer, no cache): ENIs are created rarely, so a
// read per new ENI is cheap, and a changed label, annotation or ENIConfig
// takes effect for the very next ENI without any watch to keep healthy.
// Every failure comes back as an error that errors.Is can classify
// (ErrNodeLookup, ErrNotFound, ErrInvalid, ErrForbidden) and whose text
// names the node and the ENIConfig and says what to fix.
//
// It never creates, changes or deletes anything in the cluster, and never
// imports pkg/ipamd/...: ipamd uses it, never the other way round.
package eniconfig
