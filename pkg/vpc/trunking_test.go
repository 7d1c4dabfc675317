package vpc

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// An instance type can have a trunk per the VPC resource controller's
// table; one it does not know is given the benefit of the doubt.
func TestTrunkingCompatibleFollowsTheResourceControllersTable(t *testing.T) {
	tests := []struct {
		instanceType string
		compatible   bool
	}{
		{"m5.large", true},
		{"c5.xlarge", true},
		{"t3.medium", false},
		{"t2.micro", false},
		{"m4.large", false},
		{"x99.unknown", true},
		{"", true},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.compatible, TrunkingCompatible(tc.instanceType), tc.instanceType)
	}
}

func TestBranchENIsFollowsTheResourceControllersTable(t *testing.T) {
	tests := []struct {
		instanceType string
		branches     int
		known        bool
	}{
		{"m5.large", 9, true},
		{"t3.medium", 0, true},
		{"x99.unknown", 0, false},
	}
	for _, tc := range tests {
		n, ok := BranchENIs(tc.instanceType)
		assert.Equal(t, tc.known, ok, tc.instanceType)
		assert.Equal(t, tc.branches, n, tc.instanceType)
	}
}
