package eniconfig

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeSpec(t *testing.T) {
	for _, tc := range []struct {
		name    string
		json    string
		want    Spec
		wantErr string // substring of the error; "" means success
	}{
		{name: "subnet and groups", json: `{"spec":{"subnet":"subnet-0abc123","securityGroups":["sg-01","sg-02"]}}`,
			want: Spec{Name: "n", Subnet: "subnet-0abc123", SecurityGroups: []string{"sg-01", "sg-02"}}},
		{name: "no groups", json: `{"spec":{"subnet":"subnet-0abc"}}`, want: Spec{Name: "n", Subnet: "subnet-0abc"}},
		{name: "null groups", json: `{"spec":{"subnet":"subnet-0abc","securityGroups":null}}`, want: Spec{Name: "n", Subnet: "subnet-0abc"}},
		{name: "empty groups", json: `{"spec":{"subnet":"subnet-0abc","securityGroups":[]}}`, want: Spec{Name: "n", Subnet: "subnet-0abc"}},
		{name: "unknown fields kept out", json: `{"spec":{"subnet":"subnet-0sim00000002","extra":1},"status":{}}`,
			want: Spec{Name: "n", Subnet: "subnet-0sim00000002"}},
		{name: "no spec", json: `{"metadata":{}}`, wantErr: "no spec"},
		{name: "null spec", json: `{"spec":null}`, wantErr: "no spec"},
		{name: "spec not an object", json: `{"spec":"subnet-0abc"}`, wantErr: "spec is a string, not an object"},
		{name: "no subnet", json: `{"spec":{"securityGroups":["sg-01"]}}`, wantErr: "spec.subnet is missing"},
		{name: "empty subnet", json: `{"spec":{"subnet":""}}`, wantErr: "spec.subnet is empty"},
		{name: "subnet a number", json: `{"spec":{"subnet":12}}`, wantErr: "spec.subnet is a number, not a string"},
		{name: "subnet a list", json: `{"spec":{"subnet":["subnet-0abc"]}}`, wantErr: "spec.subnet is a list"},
		{name: "subnet without prefix", json: `{"spec":{"subnet":"0abc"}}`, wantErr: `spec.subnet "0abc" is not a subnet ID`},
		{name: "group ID as subnet", json: `{"spec":{"subnet":"sg-0abc"}}`, wantErr: "not a subnet ID"},
		{name: "subnet with space", json: `{"spec":{"subnet":"subnet-0abc "}}`, wantErr: "not a subnet ID"},
		{name: "subnet upper case", json: `{"spec":{"subnet":"subnet-0ABC"}}`, wantErr: "not a subnet ID"},
		{name: "bare prefix", json: `{"spec":{"subnet":"subnet-"}}`, wantErr: "not a subnet ID"},
		{name: "groups a string", json: `{"spec":{"subnet":"subnet-0abc","securityGroups":"sg-01"}}`,
			wantErr: "spec.securityGroups is a string, not a list"},
		{name: "group not a string", json: `{"spec":{"subnet":"subnet-0abc","securityGroups":["sg-01",{"id":"sg-02"}]}}`,
			wantErr: "spec.securityGroups[1] is an object, not a string"},
		{name: "group malformed", json: `{"spec":{"subnet":"subnet-0abc","securityGroups":["subnet-0abc"]}}`,
			wantErr: `spec.securityGroups[0] "subnet-0abc" is not a security group ID`},
		{name: "group empty", json: `{"spec":{"subnet":"subnet-0abc","securityGroups":[""]}}`, wantErr: "not a security group ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var obj map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.json), &obj))
			got, err := decodeSpec("n", obj)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
