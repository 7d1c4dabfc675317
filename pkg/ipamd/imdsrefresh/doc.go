// Package imdsrefresh is the IMDS refresh: as upstream, every 30 s it
// re-reads what IMDS says about the node that can change while ipamd runs,
// and applies what changed. It owns the VPC's CIDR blocks of the cluster's
// family as last read (the sets the AddNetwork replies carry; for IPv4
// also what the host's SNAT rules leave alone) and the primary ENI's
// security groups as last given to every secondary ENI.
//
// It never changes an ENI's addresses, gives security groups only to the
// secondary ENIs the datastore lists, and gives none at all when told not
// to (custom networking: ENIs carry their ENIConfig's groups; no network
// resource provisioning: no EC2 change). A failed read keeps what is known;
// an ENI that could not be updated is retried at the next refresh. It
// reaches IMDS and EC2 only through AWS, the host only through SNAT. Like
// every job of the agent, it never imports pkg/ipamd or another job; the
// agent starts and stops it.
package imdsrefresh
