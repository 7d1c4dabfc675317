// Package ec2sim is an in-process simulator of the parts of Amazon EC2 and
// the instance metadata service (IMDSv2) that ipamd uses, served over HTTP
// on loopback so that the real aws-sdk-go-v2 clients talk to it unchanged.
//
// What it models: one VPC with one or more IPv4 CIDR blocks (a secondary
// block such as 100.64.0.0/16 is how custom networking gets pod
// addresses) and finite subnets in any of them and in any AZ, one running
// instance of a real (Nitro) instance type with its per-type ENI and IPv4
// limits, and the ENIs in the VPC with their attachments, private IPv4
// addresses, /28 IPv4 prefixes, security groups (VPC-wide, at most 5 per
// ENI) and tags; optionally an IPv6 /56 for the VPC and a /64 per subnet,
// with IPv6 addresses and /80 IPv6 prefixes on ENIs (as many per ENI as
// IPv4 addresses, each prefix counting one). The EC2 side speaks the EC2
// Query protocol (API version 2016-11-15) for the actions ipamd calls:
// DescribeInstances,
// DescribeInstanceTypes, DescribeNetworkInterfaces, DescribeSubnets,
// CreateNetworkInterface, AttachNetworkInterface,
// ModifyNetworkInterfaceAttribute, DetachNetworkInterface,
// DeleteNetworkInterface, AssignPrivateIpAddresses,
// UnassignPrivateIpAddresses, AssignIpv6Addresses, UnassignIpv6Addresses
// and CreateTags; and DescribeVpcs, which
// ipamd does not call, for tests. The IMDS side serves the metadata paths
// ipamd reads, behind IMDSv2 session tokens, and shows only attached ENIs.
//
// Trunk and branch ENIs (security groups for pods) are modelled for the
// VPC resource controller's stand-in (pkg/sim/sgpcontroller):
// CreateNetworkInterface takes InterfaceType trunk or branch, which every
// describe shows as interfaceType (plain ENIs are "interface"), and
// AssociateTrunkInterface, DisassociateTrunkInterface and
// DescribeTrunkInterfaceAssociations tie a branch to a trunk by a VLAN ID
// (1..4094) or a GRE key, unique on the trunk. A trunk attaches like any
// ENI (one slot, in IMDS, a node link; one trunk per instance); a branch
// is never attached (refused), so it takes no slot and never shows in
// IMDS, and reports status in-use while associated. The trunk must be
// attached (else IncorrectState), the branch not associated yet; other
// refusals are InvalidParameterValue, an unknown association
// InvalidAssociationID.NotFound (EC2 documents no codes for these
// actions: these are the nearest of its general ones). Deleting an
// associated branch ENI ends its association, as in EC2 (the controller
// disassociates first only because EC2 recommends it). Branch addresses
// come from the subnet like any ENI's. Not modelled: the per-type limit
// of branches per trunk (the stand-in enforces its own).
// As in EC2, an ENI can be made in a subnet of any AZ but only attached
// to the instance if it is in the instance's AZ.
//
// The simulator is strict on purpose, so that a wrong request fails loudly
// instead of being papered over: unknown actions, unknown or unmodelled
// parameters, missing required parameters and malformed values are
// rejected with the EC2 error codes (InvalidAction, UnknownParameter,
// MissingParameter, InvalidParameterValue, ...); unknown IDs fail with the
// matching *.NotFound code; limits are enforced (ENIs per instance and per
// network card, IPv4 and IPv6 addresses per ENI); subnets are finite (AWS
// reserves the first four and the last address of each subnet, in IPv4
// and in IPv6) and no address, /28 or /80 is ever handed out twice, nor
// an IPv6 address inside a delegated /80.
//
// Attachment changes take Config.AttachDelay / Config.DetachDelay to
// complete, both in EC2 and in IMDS. Faults can be switched on at any time:
// throttling of a random fraction of requests, server errors, subnet
// exhaustion, missing IAM permissions and a lagging IMDS view (served from
// a time-stamped history of the instance's network state). Every EC2 call
// is logged for assertions.
//
// Request limits and latency: Config.Throttle (DefaultThrottle() gives
// the figures EC2 publishes) gives every action a token bucket sized by
// its category (mutating, non-mutating, unfiltered-and-unpaginated
// describes) or by its own entry, refilled continuously; a request that
// finds its bucket empty is answered RequestLimitExceeded (HTTP 503)
// before anything else happens, so it changes nothing. Off by default.
// Config.ActionLatency (DefaultLatencies() has plausible figures) and
// Config.Latency delay each answer, holding no lock of the model.
//
// Accounts: an Account is one EC2 endpoint for many nodes, as real EC2
// is for a cluster. Each node (AddNode) is a Sim with its own access key
// ID, by which the endpoint routes its requests, and its own IMDS
// endpoint. The nodes of an account share the endpoint, the request
// limits (one bucket per action for all of them), the latency and an
// aggregate count of requests, throttles and retries per action
// (Snapshot); each node keeps its own call log and ThrottleStats. They do
// not share the VPC model: each node has its own copy of the VPC and its
// subnets, so free-address counts, ENIs and IDs handed out are per node,
// and a node's describes show only its own instance and ENIs.
//
// Operators' changes can be made behind the API's back (CreateAttachedENI,
// AssociateVPCCIDR, AssociateVPCIPv6CIDR, AddSubnet,
// AssociateSubnetIPv6CIDR, AddSecondaryIPs, AddIPv6Prefixes, ...).
//
// Simplifications: one region, VPC and instance per Sim (an Account's
// nodes each model the VPC apart); no resource token buckets (EC2 has
// them for RunInstances and the like, which are not modelled); at most one
// IPv6 block per VPC and per subnet, none unless configured (IPv6 metadata
// paths are then 404); request signatures are not checked (signed and
// unsigned requests are both accepted by a standalone Sim, and an
// Account reads only the access key ID); single IPv4 addresses are handed
// out lowest-free-first and IPv4 prefixes as the lowest free aligned /28,
// IPv6 addresses as random interface IDs and /80s as the first free one at
// or after a random block, from the seeded generator, so runs are
// reproducible; EC2 answers take at least 3 ms, because a
// faster server trips a client-side race in the SDK that turns into
// spurious retries (Call.Attempt tells retries from first tries).
//
// Network cards: an instance type has one or more (c6in.32xlarge 2,
// p4d.24xlarge 4, p5.48xlarge 32), each with its own ENI limit, as in
// DescribeInstanceTypes (NetworkCards, DefaultNetworkCardIndex 0,
// MaximumNetworkInterfaces the sum). AttachNetworkInterface takes
// NetworkCardIndex (default 0, as in EC2); device indexes are unique per
// card, card 0's device 0 is the primary's, a full card is refused with
// AttachmentLimitExceeded and a card the type lacks with
// InvalidParameterValue. Every describe shows attachment.networkCardIndex
// and IMDS serves network/interfaces/macs/<mac>/network-card for every
// ENI; DescribeNetworkInterfaces takes no network-card filter (EC2 has
// none). Links report each ENI's card.
//
// It never imports pkg/ipamd/...: ipamd reaches it only through the real
// AWS SDK over HTTP.
package ec2sim
