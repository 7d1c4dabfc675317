// Package subnetfigures owns the node's latest word from EC2 on how many
// addresses each subnet it uses has free: the AvailableIpAddressCount of
// the DescribeSubnets answers ipamd receives anyway (subnet discovery's
// listing and the primary subnet's exclusion check for each new ENI, the
// ENIConfig subnet's check, the subnet CIDR lookup, the re-check of the
// ENIs' subnet tags). awsutils records each answer here.
//
// It never asks EC2 itself and never makes anyone ask: a figure is as old
// as the answer that carried it, and AsOf says when that was. A subnet
// counts as used while ipamd has an ENI in it (TrackENIs) or the last
// subnet choice for a new ENI named it (SetCandidates); All and the
// gauges leave other subnets out. It does no I/O and imports nothing of
// ipamd, so the clients, the agent and its jobs may all use it.
//
// Files: figures.go (the owner and its accessors), collector.go (the
// Prometheus gauges, computed at scrape time).
package subnetfigures
