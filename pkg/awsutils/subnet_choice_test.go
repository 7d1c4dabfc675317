package awsutils

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSubnetExcluded(t *testing.T) {
	const cluster = "blue"
	tests := []struct {
		name    string
		tags    map[string]string
		cluster string
		want    bool
	}{
		{"no role tag", nil, cluster, false},
		{"no role tag, other cluster's tag", map[string]string{TagSubnetClusterPrefix + "red": "1"}, cluster, false},
		{"role 1", map[string]string{TagSubnetCNIRole: "1"}, cluster, false},
		{"role empty value", map[string]string{TagSubnetCNIRole: ""}, cluster, false},
		{"role 0", map[string]string{TagSubnetCNIRole: "0"}, cluster, true},
		{"role 0 with our cluster tag", map[string]string{TagSubnetCNIRole: "0", TagSubnetClusterPrefix + cluster: "1"}, cluster, true},
		{"our cluster", map[string]string{TagSubnetCNIRole: "1", TagSubnetClusterPrefix + cluster: "owned"}, cluster, false},
		{"other cluster only", map[string]string{TagSubnetCNIRole: "1", TagSubnetClusterPrefix + "red": "owned"}, cluster, true},
		{"shared with us", map[string]string{TagSubnetCNIRole: "1", TagSubnetClusterPrefix + "red": "1", TagSubnetClusterPrefix + cluster: "1"}, cluster, false},
		{"other cluster, no CLUSTER_NAME", map[string]string{TagSubnetCNIRole: "1", TagSubnetClusterPrefix + "red": "1"}, "", false},
		{"prefix of our name is not our tag", map[string]string{TagSubnetCNIRole: "1", TagSubnetClusterPrefix + "blu": "1"}, cluster, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, SubnetExcluded(tt.tags, tt.cluster))
		})
	}
}

func TestChooseENISubnets(t *testing.T) {
	role := func(v string, clusters ...string) map[string]string {
		m := map[string]string{TagSubnetCNIRole: v}
		for _, c := range clusters {
			m[TagSubnetClusterPrefix+c] = "1"
		}
		return m
	}
	primary := Subnet{ID: "subnet-p", AvailableIPs: 10}
	primaryOff := Subnet{ID: "subnet-p", AvailableIPs: 10, Tags: role("0")}
	listing := []Subnet{
		primary,
		{ID: "subnet-untagged", AvailableIPs: 500},
		{ID: "subnet-a", AvailableIPs: 100, Tags: role("1")},
		{ID: "subnet-b", AvailableIPs: 300, Tags: role("yes")},
		{ID: "subnet-off", AvailableIPs: 900, Tags: role("0")},
		{ID: "subnet-blue", AvailableIPs: 200, Tags: role("1", "blue")},
		{ID: "subnet-red", AvailableIPs: 250, Tags: role("1", "red")},
		{ID: "subnet-tie", AvailableIPs: 100, Tags: role("1")},
	}
	tests := []struct {
		name    string
		q       SubnetQuery
		want    []string
		wantErr error
	}{
		{
			name: "discovery, no cluster: tagged by free addresses, the untagged primary, never role 0",
			q:    SubnetQuery{Discovery: true, PrimaryID: "subnet-p", Listing: listing, Listed: true},
			want: []string{"subnet-b", "subnet-red", "subnet-blue", "subnet-a", "subnet-tie", "subnet-p"},
		},
		{
			name: "discovery, cluster blue: red's subnet is out",
			q:    SubnetQuery{Discovery: true, PrimaryID: "subnet-p", Cluster: "blue", Listing: listing, Listed: true},
			want: []string{"subnet-b", "subnet-blue", "subnet-a", "subnet-tie", "subnet-p"},
		},
		{
			name: "discovery, the primary has the most free addresses",
			q: SubnetQuery{Discovery: true, PrimaryID: "subnet-p", Listed: true, Listing: []Subnet{
				{ID: "subnet-a", AvailableIPs: 5, Tags: role("1")}, {ID: "subnet-p", AvailableIPs: 50}}},
			want: []string{"subnet-p", "subnet-a"},
		},
		{
			name: "discovery, excluded primary is skipped",
			q: SubnetQuery{Discovery: true, PrimaryID: "subnet-p", Listed: true,
				Listing: []Subnet{primaryOff, {ID: "subnet-a", AvailableIPs: 1, Tags: role("1")}}},
			want: []string{"subnet-a"},
		},
		{
			name: "discovery, primary tagged for another cluster is skipped",
			q: SubnetQuery{Discovery: true, PrimaryID: "subnet-p", Cluster: "blue", Listed: true,
				Listing: []Subnet{{ID: "subnet-p", AvailableIPs: 99, Tags: role("1", "red")}, {ID: "subnet-a", Tags: role("1")}}},
			want: []string{"subnet-a"},
		},
		{
			name:    "discovery, nothing usable",
			q:       SubnetQuery{Discovery: true, PrimaryID: "subnet-p", Listed: true, Listing: []Subnet{primaryOff, {ID: "subnet-x", AvailableIPs: 9}}},
			wantErr: ErrNoUsableSubnet,
		},
		{
			name:    "discovery, empty listing",
			q:       SubnetQuery{Discovery: true, PrimaryID: "subnet-p", Listed: true},
			wantErr: ErrNoUsableSubnet,
		},
		{
			name: "discovery, listing failed: the primary",
			q:    SubnetQuery{Discovery: true, PrimaryID: "subnet-p"},
			want: []string{"subnet-p"},
		},
		{
			name:    "discovery, listing failed and the primary is excluded",
			q:       SubnetQuery{Discovery: true, PrimaryID: "subnet-p", Primary: &primaryOff},
			wantErr: ErrSubnetExcluded,
		},
		{
			name: "no discovery: the primary, whatever else is tagged",
			q:    SubnetQuery{PrimaryID: "subnet-p", Primary: &primary, Listing: listing, Listed: true},
			want: []string{"subnet-p"},
		},
		{
			name:    "no discovery, excluded primary is refused",
			q:       SubnetQuery{PrimaryID: "subnet-p", Primary: &primaryOff},
			wantErr: ErrSubnetExcluded,
		},
		{
			name: "no discovery, exclusion check failed: the primary",
			q:    SubnetQuery{PrimaryID: "subnet-p"},
			want: []string{"subnet-p"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ChooseENISubnets(tt.q)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.Empty(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
