package pool

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
)

func TestIsManaged(t *testing.T) {
	id := awsutils.Identity{InstanceID: "i-self", PrimaryENIID: "eni-primary"}
	tags := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	const (
		noManage = awsutils.TagNoManage
		owner    = awsutils.TagInstanceID
	)
	manageUntagged, ignoreUntagged, imdsOnly := ENIRules{}, ENIRules{IgnoreUntagged: true}, ENIRules{IgnoreUntagged: true, TagsUnknown: true}
	tests := []struct {
		name string
		eni  awsutils.ENI
		// managed under the default rules, MANAGE_UNTAGGED_ENI=false, and
		// in IMDS-only mode (tags unknown) with MANAGE_UNTAGGED_ENI=false
		def, ignore, imds bool
	}{
		{"primary, even tagged no_manage", awsutils.ENI{ID: "eni-primary", Tags: tags(noManage, "true")}, true, true, true},
		{"ours", awsutils.ENI{ID: "eni-1", Tags: tags(owner, "i-self")}, true, true, true},
		{"untagged", awsutils.ENI{ID: "eni-1", Tags: tags()}, true, false, true},
		{"other tags only", awsutils.ENI{ID: "eni-1", Tags: tags("team", "net")}, true, false, true},
		{"another instance's", awsutils.ENI{ID: "eni-1", Tags: tags(owner, "i-other")}, true, false, true},
		{"no_manage=true", awsutils.ENI{ID: "eni-1", Tags: tags(noManage, "true", owner, "i-self")}, false, false, true},
		{"no_manage=false wins over a missing instance tag", awsutils.ENI{ID: "eni-1", Tags: tags(noManage, "false")}, true, true, true},
		{"no_manage=TRUE is not true", awsutils.ENI{ID: "eni-1", Tags: tags(noManage, "TRUE")}, true, true, true},
		{"trunk, ours", awsutils.ENI{ID: "eni-1", InterfaceType: "trunk", Tags: tags(owner, "i-self")}, true, true, true},
		{"trunk, untagged", awsutils.ENI{ID: "eni-1", InterfaceType: "trunk", Tags: tags()}, true, false, true},
		{"trunk, no_manage=true", awsutils.ENI{ID: "eni-1", InterfaceType: "trunk", Tags: tags(noManage, "true")}, false, false, true},
		{"efa-only", awsutils.ENI{ID: "eni-1", InterfaceType: "efa-only"}, false, false, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.def, IsManaged(tt.eni, id, manageUntagged), "default: %s", tt.name)
		assert.Equal(t, tt.ignore, IsManaged(tt.eni, id, ignoreUntagged), "MANAGE_UNTAGGED_ENI=false: %s", tt.name)
		assert.Equal(t, tt.imds, IsManaged(tt.eni, id, imdsOnly), "IMDS-only: %s", tt.name)
	}
}

func TestCountUnmanaged(t *testing.T) {
	id := awsutils.Identity{InstanceID: "i-self", PrimaryENIID: "eni-p"}
	enis := []awsutils.ENI{
		{ID: "eni-p", Attached: true},
		{ID: "eni-ours", Attached: true, Tags: map[string]string{awsutils.TagInstanceID: "i-self"}},
		{ID: "eni-untagged", Attached: true, Tags: map[string]string{}},
		{ID: "eni-nomanage", Attached: true, Tags: map[string]string{awsutils.TagNoManage: "true"}},
		{ID: "eni-detached", Tags: map[string]string{awsutils.TagNoManage: "true"}},
		{ID: "eni-card1", Attached: true, NetworkCard: 1, Tags: map[string]string{awsutils.TagNoManage: "true"}},
	}
	assert.Equal(t, 1, CountUnmanaged(enis, id, ENIRules{}))
	assert.Equal(t, 2, CountUnmanaged(enis, id, ENIRules{IgnoreUntagged: true}))
	assert.Equal(t, 0, CountUnmanaged(enis, id, ENIRules{TagsUnknown: true}))
}

// The ENIs that may give pods addresses: the limit less the ones left
// alone, the primary under custom networking, and the trunk's slot when a
// trunk is wanted.
func TestPodENIsLeaveOutThePrimaryUnderCustomNetworkingAndTheTrunksSlot(t *testing.T) {
	tests := []struct {
		max, unmanaged int
		custom, trunk  bool
		want           int
	}{
		{3, 0, false, false, 3},
		{3, 1, false, false, 2},
		{3, 0, true, false, 2},
		{3, 0, false, true, 2},
		{3, 1, true, true, 0},
		{1, 1, true, true, 0},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, PodENIs(tc.max, tc.unmanaged, tc.custom, tc.trunk), "%+v", tc)
	}
}

func TestMaxAddresses(t *testing.T) {
	assert.Equal(t, 27, MaxAddresses(3, 9, false))
	assert.Equal(t, 432, MaxAddresses(3, 9, true))
	assert.Equal(t, 0, MaxAddresses(-1, 9, false), "more unmanaged ENIs than the limit leaves nothing")
}
