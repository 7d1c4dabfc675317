package ec2sim

import (
	"net/netip"
	"time"
)

// ec2Namespace is the XML namespace of EC2 API version 2016-11-15.
const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// The types below are the wire shapes of EC2 Query responses: a root
// element <ActionResponse> holding <requestId> and the result fields,
// lists as <fooSet><item>...</item></fooSet>, errors as
// <Response><Errors><Error>... .

type xmlErrorResponse struct {
	Errors    []xmlError `xml:"Errors>Error"`
	RequestID string     `xml:"RequestID"`
}

type xmlError struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// response is implemented by every success response.
type response interface{ setRequestID(string) }

type respHeader struct {
	RequestID string `xml:"requestId"`
}

func (h *respHeader) setRequestID(id string) { h.RequestID = id }

// set is an EC2 list: <xSet><item>..</item></xSet>, always emitted.
type set[T any] struct {
	Items []T `xml:"item"`
}

type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xmlGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xmlPrivateIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
	PrivateDNSName   string `xml:"privateDnsName"`
	Primary          bool   `xml:"primary"`
}

type xmlPrefix struct {
	IPv4Prefix string `xml:"ipv4Prefix"`
}

type xmlENIIPv6 struct {
	IPv6Address   string `xml:"ipv6Address"`
	IsPrimaryIPv6 bool   `xml:"isPrimaryIpv6"`
}

type xmlIPv6Prefix struct {
	IPv6Prefix string `xml:"ipv6Prefix"`
}

type xmlAssignedIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
}

type xmlENIAttachment struct {
	AttachmentID        string `xml:"attachmentId"`
	InstanceID          string `xml:"instanceId,omitempty"`
	InstanceOwnerID     string `xml:"instanceOwnerId,omitempty"`
	DeviceIndex         int    `xml:"deviceIndex"`
	NetworkCardIndex    int    `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

// xmlENI serves both NetworkInterface (DescribeNetworkInterfaces,
// CreateNetworkInterface) and InstanceNetworkInterface (DescribeInstances);
// fields one shape lacks are simply skipped by the SDK.
type xmlENI struct {
	NetworkInterfaceID string             `xml:"networkInterfaceId"`
	SubnetID           string             `xml:"subnetId"`
	VpcID              string             `xml:"vpcId"`
	AvailabilityZone   string             `xml:"availabilityZone,omitempty"`
	Description        string             `xml:"description"`
	OwnerID            string             `xml:"ownerId"`
	RequesterManaged   bool               `xml:"requesterManaged"`
	Status             string             `xml:"status"`
	MacAddress         string             `xml:"macAddress"`
	PrivateIPAddress   string             `xml:"privateIpAddress"`
	PrivateDNSName     string             `xml:"privateDnsName"`
	SourceDestCheck    bool               `xml:"sourceDestCheck"`
	InterfaceType      string             `xml:"interfaceType"`
	Groups             set[xmlGroup]      `xml:"groupSet"`
	Attachment         *xmlENIAttachment  `xml:"attachment,omitempty"`
	PrivateIPs         set[xmlPrivateIP]  `xml:"privateIpAddressesSet"`
	IPv4Prefixes       set[xmlPrefix]     `xml:"ipv4PrefixSet"`
	IPv6Addresses      set[xmlENIIPv6]    `xml:"ipv6AddressesSet"`
	IPv6Prefixes       set[xmlIPv6Prefix] `xml:"ipv6PrefixSet"`
	Tags               *set[xmlTag]       `xml:"tagSet,omitempty"`
}

type xmlSubnet struct {
	SubnetID                string      `xml:"subnetId"`
	SubnetArn               string      `xml:"subnetArn"`
	State                   string      `xml:"state"`
	VpcID                   string      `xml:"vpcId"`
	OwnerID                 string      `xml:"ownerId"`
	CidrBlock               string      `xml:"cidrBlock"`
	AvailableIPAddressCount int         `xml:"availableIpAddressCount"`
	AvailabilityZone        string      `xml:"availabilityZone"`
	DefaultForAz            bool        `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool        `xml:"mapPublicIpOnLaunch"`
	Tags                    set[xmlTag] `xml:"tagSet"`

	IPv6CidrBlocks              set[xmlIPv6Block] `xml:"ipv6CidrBlockAssociationSet"`
	AssignIPv6AddressOnCreation bool              `xml:"assignIpv6AddressOnCreation"`
	IPv6Native                  bool              `xml:"ipv6Native"`
}

// xmlIPv6Block is an IPv6 CIDR block association of a subnet or (with
// the pool and border group) of the VPC.
type xmlIPv6Block struct {
	AssociationID        string            `xml:"associationId"`
	IPv6CidrBlock        string            `xml:"ipv6CidrBlock"`
	State                xmlCidrBlockState `xml:"ipv6CidrBlockState"`
	NetworkBorderGroup   string            `xml:"networkBorderGroup,omitempty"`
	IPv6Pool             string            `xml:"ipv6Pool,omitempty"`
	IPSource             string            `xml:"ipSource"`
	IPv6AddressAttribute string            `xml:"ipv6AddressAttribute"`
}

type xmlCidrBlockState struct {
	State string `xml:"state"`
}

type xmlVpcCidrBlock struct {
	AssociationID string            `xml:"associationId"`
	CidrBlock     string            `xml:"cidrBlock"`
	State         xmlCidrBlockState `xml:"cidrBlockState"`
}

type xmlVpc struct {
	VpcID           string               `xml:"vpcId"`
	OwnerID         string               `xml:"ownerId"`
	State           string               `xml:"state"`
	CidrBlock       string               `xml:"cidrBlock"`
	CidrBlocks      set[xmlVpcCidrBlock] `xml:"cidrBlockAssociationSet"`
	IPv6CidrBlocks  set[xmlIPv6Block]    `xml:"ipv6CidrBlockAssociationSet"`
	DhcpOptionsID   string               `xml:"dhcpOptionsId"`
	InstanceTenancy string               `xml:"instanceTenancy"`
	IsDefault       bool                 `xml:"isDefault"`
	Tags            set[xmlTag]          `xml:"tagSet"`
}

type xmlInstanceState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type xmlPlacement struct {
	AvailabilityZone string `xml:"availabilityZone"`
	Tenancy          string `xml:"tenancy"`
}

type xmlInstance struct {
	InstanceID        string           `xml:"instanceId"`
	ImageID           string           `xml:"imageId"`
	InstanceState     xmlInstanceState `xml:"instanceState"`
	PrivateDNSName    string           `xml:"privateDnsName"`
	InstanceType      string           `xml:"instanceType"`
	LaunchTime        string           `xml:"launchTime"`
	Placement         xmlPlacement     `xml:"placement"`
	SubnetID          string           `xml:"subnetId"`
	VpcID             string           `xml:"vpcId"`
	PrivateIPAddress  string           `xml:"privateIpAddress"`
	Architecture      string           `xml:"architecture"`
	Groups            set[xmlGroup]    `xml:"groupSet"`
	NetworkInterfaces set[xmlENI]      `xml:"networkInterfaceSet"`
	Tags              set[xmlTag]      `xml:"tagSet"`
}

type xmlReservation struct {
	ReservationID string           `xml:"reservationId"`
	OwnerID       string           `xml:"ownerId"`
	Groups        set[xmlGroup]    `xml:"groupSet"`
	Instances     set[xmlInstance] `xml:"instancesSet"`
}

type xmlNetworkCard struct {
	NetworkCardIndex         int `xml:"networkCardIndex"`
	MaximumNetworkInterfaces int `xml:"maximumNetworkInterfaces"`
}

type xmlNetworkInfo struct {
	MaximumNetworkInterfaces  int                 `xml:"maximumNetworkInterfaces"`
	MaximumNetworkCards       int                 `xml:"maximumNetworkCards"`
	DefaultNetworkCardIndex   int                 `xml:"defaultNetworkCardIndex"`
	NetworkCards              set[xmlNetworkCard] `xml:"networkCards"`
	IPv4AddressesPerInterface int                 `xml:"ipv4AddressesPerInterface"`
	IPv6AddressesPerInterface int                 `xml:"ipv6AddressesPerInterface"`
	IPv6Supported             bool                `xml:"ipv6Supported"`
	EnaSupport                string              `xml:"enaSupport"`
}

type xmlInstanceType struct {
	InstanceType      string         `xml:"instanceType"`
	CurrentGeneration bool           `xml:"currentGeneration"`
	BareMetal         bool           `xml:"bareMetal"`
	Hypervisor        string         `xml:"hypervisor"`
	NetworkInfo       xmlNetworkInfo `xml:"networkInfo"`
}

type describeInstancesResponse struct {
	respHeader
	Reservations set[xmlReservation] `xml:"reservationSet"`
}

type describeInstanceTypesResponse struct {
	respHeader
	InstanceTypes set[xmlInstanceType] `xml:"instanceTypeSet"`
}

type describeNetworkInterfacesResponse struct {
	respHeader
	NetworkInterfaces set[xmlENI] `xml:"networkInterfaceSet"`
	NextToken         string      `xml:"nextToken,omitempty"`
}

type describeSubnetsResponse struct {
	respHeader
	Subnets   set[xmlSubnet] `xml:"subnetSet"`
	NextToken string         `xml:"nextToken,omitempty"`
}

type describeVpcsResponse struct {
	respHeader
	Vpcs      set[xmlVpc] `xml:"vpcSet"`
	NextToken string      `xml:"nextToken,omitempty"`
}

type createNetworkInterfaceResponse struct {
	respHeader
	NetworkInterface xmlENI `xml:"networkInterface"`
	ClientToken      string `xml:"clientToken,omitempty"`
}

type attachNetworkInterfaceResponse struct {
	respHeader
	AttachmentID     string `xml:"attachmentId"`
	NetworkCardIndex int    `xml:"networkCardIndex"`
}

type assignPrivateIPAddressesResponse struct {
	respHeader
	NetworkInterfaceID string             `xml:"networkInterfaceId"`
	AssignedIPs        set[xmlAssignedIP] `xml:"assignedPrivateIpAddressesSet"`
	AssignedPrefixes   set[xmlPrefix]     `xml:"assignedIpv4PrefixSet"`
}

type assignIPv6AddressesResponse struct {
	respHeader
	NetworkInterfaceID string      `xml:"networkInterfaceId"`
	Addresses          set[string] `xml:"assignedIpv6Addresses"`
	Prefixes           set[string] `xml:"assignedIpv6PrefixSet"`
}

type unassignIPv6AddressesResponse struct {
	respHeader
	NetworkInterfaceID string      `xml:"networkInterfaceId"`
	Addresses          set[string] `xml:"unassignedIpv6Addresses"`
	Prefixes           set[string] `xml:"unassignedIpv6PrefixSet"`
}

// xmlTrunkAssociation is a TrunkInterfaceAssociation; only the ID of its
// protocol (vlanId or greKey) is sent.
type xmlTrunkAssociation struct {
	AssociationID     string      `xml:"associationId"`
	BranchInterfaceID string      `xml:"branchInterfaceId"`
	TrunkInterfaceID  string      `xml:"trunkInterfaceId"`
	InterfaceProtocol string      `xml:"interfaceProtocol"`
	VlanID            *int        `xml:"vlanId,omitempty"`
	GreKey            *int        `xml:"greKey,omitempty"`
	Tags              set[xmlTag] `xml:"tagSet"`
}

type associateTrunkInterfaceResponse struct {
	respHeader
	Association xmlTrunkAssociation `xml:"interfaceAssociation"`
	ClientToken string              `xml:"clientToken,omitempty"`
}

type disassociateTrunkInterfaceResponse struct {
	respHeader
	Return      bool   `xml:"return"`
	ClientToken string `xml:"clientToken,omitempty"`
}

type describeTrunkInterfaceAssociationsResponse struct {
	respHeader
	Associations set[xmlTrunkAssociation] `xml:"interfaceAssociationSet"`
	NextToken    string                   `xml:"nextToken,omitempty"`
}

// returnResponse answers actions whose result is just <return>true</return>.
type returnResponse struct {
	respHeader
	Return bool `xml:"return"`
}

// wireTime formats a timestamp the way EC2 does (and the SDK parses).
func wireTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func (s *Sim) dnsName(a netip.Addr) string {
	b := a.As4()
	return "ip-" + itoa(int(b[0])) + "-" + itoa(int(b[1])) + "-" + itoa(int(b[2])) + "-" + itoa(int(b[3])) +
		"." + s.cfg.Region + ".compute.internal"
}

func tagSet(m map[string]string) set[xmlTag] {
	out := set[xmlTag]{}
	for _, k := range sortedKeys(m) {
		out.Items = append(out.Items, xmlTag{Key: k, Value: m[k]})
	}
	return out
}

func (s *Sim) groupSet(ids []string) set[xmlGroup] {
	out := set[xmlGroup]{}
	for _, id := range ids {
		out.Items = append(out.Items, xmlGroup{GroupID: id, GroupName: "ec2sim-" + id})
	}
	return out
}

// xmlFromENI renders an ENI. forInstance selects the
// InstanceNetworkInterface flavour (no AZ, no tags, no instance ID in the
// attachment).
func (s *Sim) xmlFromENI(e *eni, forInstance bool) xmlENI {
	x := xmlENI{
		NetworkInterfaceID: e.id,
		SubnetID:           e.subnetID,
		VpcID:              s.cfg.VPCID,
		Description:        e.description,
		OwnerID:            accountID,
		Status:             e.status(),
		MacAddress:         e.mac,
		PrivateIPAddress:   e.primary.String(),
		PrivateDNSName:     s.dnsName(e.primary),
		SourceDestCheck:    true,
		InterfaceType:      e.kind,
		Groups:             s.groupSet(e.sgs),
	}
	x.PrivateIPs.Items = append(x.PrivateIPs.Items, xmlPrivateIP{e.primary.String(), s.dnsName(e.primary), true})
	for _, ip := range e.secondaries {
		x.PrivateIPs.Items = append(x.PrivateIPs.Items, xmlPrivateIP{ip.String(), s.dnsName(ip), false})
	}
	for _, p := range e.prefixes {
		x.IPv4Prefixes.Items = append(x.IPv4Prefixes.Items, xmlPrefix{p.String()})
	}
	for _, a := range e.ipv6s {
		x.IPv6Addresses.Items = append(x.IPv6Addresses.Items, xmlENIIPv6{IPv6Address: a.String()})
	}
	for _, p := range e.ipv6Pfxs {
		x.IPv6Prefixes.Items = append(x.IPv6Prefixes.Items, xmlIPv6Prefix{p.String()})
	}
	if a := e.att; a != nil {
		x.Attachment = &xmlENIAttachment{
			AttachmentID:        a.id,
			DeviceIndex:         a.device,
			NetworkCardIndex:    a.card,
			Status:              a.status,
			AttachTime:          wireTime(a.attachTime),
			DeleteOnTermination: a.deleteOnTermination,
		}
		if !forInstance {
			x.Attachment.InstanceID = s.instance.id
			x.Attachment.InstanceOwnerID = accountID
		}
	}
	if !forInstance {
		x.AvailabilityZone = s.subnets[e.subnetID].az
		ts := tagSet(e.tags)
		x.Tags = &ts
	}
	return x
}
