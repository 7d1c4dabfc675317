package ec2sim

import "sort"

// typeLimits is the networking part of an instance type, as
// DescribeInstanceTypes reports it.
type typeLimits struct {
	maxENIs     int // instance-wide (sum over network cards)
	ipv4PerENI  int // including the ENI's primary address
	defaultCard int
	cards       []int // index -> maximum ENIs on that card
	hypervisor  string
	bareMetal   bool
}

// instanceTypes holds a few real Nitro types; the values match
// /work/shared/data/instance-limits.tsv (whose ENI column is the default
// card's count; maxENIs here is the instance-wide total, as EC2 reports).
var instanceTypes = map[string]typeLimits{
	"t3.nano":       {maxENIs: 2, ipv4PerENI: 2, cards: []int{2}, hypervisor: "nitro"},
	"t3.medium":     {maxENIs: 3, ipv4PerENI: 6, cards: []int{3}, hypervisor: "nitro"},
	"m5.large":      {maxENIs: 3, ipv4PerENI: 10, cards: []int{3}, hypervisor: "nitro"},
	"m5.xlarge":     {maxENIs: 4, ipv4PerENI: 15, cards: []int{4}, hypervisor: "nitro"},
	"m5.4xlarge":    {maxENIs: 8, ipv4PerENI: 30, cards: []int{8}, hypervisor: "nitro"},
	"c5.18xlarge":   {maxENIs: 15, ipv4PerENI: 50, cards: []int{15}, hypervisor: "nitro"},
	"m6i.32xlarge":  {maxENIs: 15, ipv4PerENI: 50, cards: []int{15}, hypervisor: "nitro"},
	"c6in.32xlarge": {maxENIs: 16, ipv4PerENI: 50, cards: []int{8, 8}, hypervisor: "nitro"},
	"p4d.24xlarge":  {maxENIs: 60, ipv4PerENI: 50, cards: []int{15, 15, 15, 15}, hypervisor: "nitro"},
	"p5.48xlarge":   {maxENIs: 64, ipv4PerENI: 50, cards: p5Cards(), hypervisor: "nitro"},
}

// p5Cards is p5.48xlarge's 32 network cards of 2 ENIs each.
func p5Cards() []int {
	cards := make([]int, 32)
	for i := range cards {
		cards[i] = 2
	}
	return cards
}

// InstanceTypes lists the instance types the simulator knows, sorted.
func InstanceTypes() []string {
	out := make([]string, 0, len(instanceTypes))
	for t := range instanceTypes {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
