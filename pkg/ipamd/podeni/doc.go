// Package podeni decides ipamd's CNI answer for a pod under security
// groups for pods (ENABLE_POD_ENI): whether the pod asked for a branch ENI
// (a limit named vpc.amazonaws.com/pod-eni* on its first container) and,
// if so, the reply fields taken from the vpc.amazonaws.com/pod-eni
// annotation the VPC resource controller writes: the branch's VLAN ID,
// MAC, subnet gateway and address, with the trunk ENI's link index as the
// parent.
//
// It is pure: the caller looks the pod up and finds the trunk's link; the
// package reads only what it is given and never touches the datastore, the
// API server or the kernel. A branch pod's address belongs to the
// controller, so nothing here ever allocates or frees one.
package podeni
