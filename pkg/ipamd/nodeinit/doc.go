// Package nodeinit is node initialisation from EC2 and IMDS, run once at
// start before anything is served: the instance's networking limits, the
// node's pod capacity, and the node's addresses put into the datastore.
// In IPv4 mode those are the managed ENIs (tagged as ipamd's) and their
// addresses, and it works out what the pool manager is sized with; in
// IPv6 mode it is the primary ENI's /80 (assigned through EC2 if the ENI
// has none).
//
// With ENABLE_MULTI_NIC (Cards) it decides which network cards are
// managed (ManagedCards) and fills one datastore per managed card above 0
// with that card's ENIs; card 0 is IPv4's as without multi-NIC.
//
// It decides which ENIs are ipamd's with the pool manager's rules
// (pool.IsManaged), so start and the ENI sync agree. It never frees or
// detaches an ENI and creates one only on a managed card above 0 that has
// none (as upstream), never returns an address to EC2, and reaches
// the host only through the SetupENI it is given. It never imports
// pkg/ipamd; the agent calls it and builds the pool manager from what it
// returns.
package nodeinit
