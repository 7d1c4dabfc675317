// Package sim holds the simulators the product is demonstrated and tested
// with: an EC2/IMDS endpoint the real AWS SDK talks to (ec2sim), a container
// runtime that serves the real CRI API (fakecri), a pod churn driver
// that speaks ipamd's gRPC API the way the CNI plugin does (churn), and a
// stand-in for the VPC resource controller that gives security-groups-
// for-pods nodes their trunk and pods their branch ENIs (sgpcontroller). `make
// run` (cmd/tools/sim-node) is built on them; they never touch the host.
// They never import the agent or its jobs (pkg/ipamd, pool, podip,
// rpcserver), whose tests use them; only devpool builds on the datastore.
// Production code never imports them, except the agent's use of devpool.
package sim
