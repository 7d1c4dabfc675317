package ipamd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
)

// The trunk is asked for only with pod ENI on an instance type that can
// have one, in IPv4 only while network card 0 has a free ENI slot (ENIs <
// limit - unmanaged), in IPv6 always; custom networking names a
// non-default ENIConfig whatever the room, and while its name is unknown
// nothing is asked; and nothing is asked within a minute of the CNINode
// being seen to hold it.
func TestATrunkIsAskedForOnlyWithPodENIATrunkingTypeAndAFreeENISlot(t *testing.T) {
	sgp := k8sapi.CNINodeFeature{Name: k8sapi.FeatureSecurityGroupsForPods}
	cn := func(v string) k8sapi.CNINodeFeature {
		return k8sapi.CNINodeFeature{Name: k8sapi.FeatureCustomNetworking, Value: v}
	}
	room := pool.ENICounts{ENIs: 2, MaxENIs: 3}
	full := pool.ENICounts{ENIs: 3, MaxENIs: 3}
	fullByUnmanaged := pool.ENICounts{ENIs: 2, Unmanaged: 1, MaxENIs: 3}
	never := time.Duration(-1)
	tests := []struct {
		name string
		ev   trunkAskEvidence
		want []k8sapi.CNINodeFeature
	}{
		{"pod ENI off", trunkAskEvidence{Counts: room, SinceConfirmed: never}, nil},
		{"IPv4 with a free slot", trunkAskEvidence{PodENI: true, Counts: room, SinceConfirmed: never}, []k8sapi.CNINodeFeature{sgp}},
		{"IPv4, every slot taken", trunkAskEvidence{PodENI: true, Counts: full, SinceConfirmed: never}, nil},
		{"IPv4, the last slot taken by an unmanaged ENI", trunkAskEvidence{PodENI: true, Counts: fullByUnmanaged, SinceConfirmed: never}, nil},
		{"IPv6 asks whatever the counts", trunkAskEvidence{PodENI: true, IPv6: true, Counts: full, SinceConfirmed: never}, []k8sapi.CNINodeFeature{sgp}},
		{"custom networking names the ENIConfig", trunkAskEvidence{PodENI: true, Counts: room, CustomNetworking: true, ENIConfig: "us-west-2a",
			SinceConfirmed: never}, []k8sapi.CNINodeFeature{cn("us-west-2a"), sgp}},
		{"custom networking without room still names it", trunkAskEvidence{PodENI: true, Counts: full, CustomNetworking: true, ENIConfig: "us-west-2a",
			SinceConfirmed: never}, []k8sapi.CNINodeFeature{cn("us-west-2a")}},
		{"the default ENIConfig is not named", trunkAskEvidence{PodENI: true, Counts: room, CustomNetworking: true, ENIConfig: "default",
			SinceConfirmed: never}, []k8sapi.CNINodeFeature{sgp}},
		{"custom networking, the ENIConfig name unknown: nothing this time", trunkAskEvidence{PodENI: true, Counts: room, CustomNetworking: true,
			SinceConfirmed: never}, nil},
		{"IPv6 custom networking, the ENIConfig name unknown: nothing this time", trunkAskEvidence{PodENI: true, IPv6: true, Counts: full,
			CustomNetworking: true, SinceConfirmed: never}, nil},
		{"an instance type that cannot have a trunk", trunkAskEvidence{PodENI: true, InstanceType: "t3.medium", Counts: room,
			SinceConfirmed: never}, nil},
		{"IPv6 on an instance type that cannot have a trunk", trunkAskEvidence{PodENI: true, InstanceType: "t3.medium", IPv6: true,
			Counts: full, SinceConfirmed: never}, nil},
		{"custom networking on an instance type that cannot have a trunk", trunkAskEvidence{PodENI: true, InstanceType: "t3.medium",
			Counts: room, CustomNetworking: true, ENIConfig: "us-west-2a", SinceConfirmed: never}, nil},
		{"an instance type that can have a trunk", trunkAskEvidence{PodENI: true, InstanceType: "m5.large", Counts: room,
			SinceConfirmed: never}, []k8sapi.CNINodeFeature{sgp}},
		{"an instance type the table does not know", trunkAskEvidence{PodENI: true, InstanceType: "x99.unknown", Counts: room,
			SinceConfirmed: never}, []k8sapi.CNINodeFeature{sgp}},
		{"an ENIConfig label without custom networking is not named", trunkAskEvidence{PodENI: true, Counts: room, ENIConfig: "us-west-2a",
			SinceConfirmed: never}, []k8sapi.CNINodeFeature{sgp}},
		{"confirmed moments ago", trunkAskEvidence{PodENI: true, Counts: room, SinceConfirmed: 10 * time.Second}, nil},
		{"confirmed a minute ago: asked again", trunkAskEvidence{PodENI: true, Counts: room, SinceConfirmed: time.Minute}, []k8sapi.CNINodeFeature{sgp}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, trunkFeatures(tc.ev))
		})
	}
}
