// Package pool owns the node's address pool against EC2: the pool manager
// that grows and shrinks the warm pool with warmpool.Decide (secondary IPs,
// /28 prefixes, ENIs), raises the leak signal when the pool cannot grow,
// and keeps the datastore's ENIs and addresses in line with what IMDS and
// EC2 report (the ENI sync). It leaves alone the ENIs upstream's rules
// leave alone (no_manage, MANAGE_UNTAGGED_ENI), and neither grows the pool
// nor frees an ENI while Schedulable says the node is cordoned. With
// ENABLE_SUBNET_DISCOVERY it marks a secondary ENI whose subnet is tagged
// out of pod IPs excluded in the datastore (re-checked at every ENI sync),
// never grows onto it and returns its idle addresses to EC2. With
// ENABLE_POD_ENI, on an instance type that can have a trunk, it holds an
// ENI slot for the trunk and asks for it at every step until it is
// attached (trunk.go); it keeps the trunk in the datastore without ever
// growing onto, tagging or freeing it.
//
// It never hands addresses to pods and never frees one a pod holds, except
// when EC2 no longer has it. It reaches EC2 only through AWS and the
// datastore only through Store; it never imports the agent (pkg/ipamd),
// the RPC server or the pod-IP reconciler.
package pool
