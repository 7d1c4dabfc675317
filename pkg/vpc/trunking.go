package vpc

import rcvpc "github.com/aws/amazon-vpc-resource-controller-k8s/pkg/aws/vpc"

// Whether an instance type can have a trunk ENI (security groups for pods)
// and how many branch ENIs it takes come from the VPC resource
// controller's own table: the controller is what attaches trunks and
// branches, so its view is the one that decides. That package is data
// only and imports nothing.

// TrunkingCompatible reports whether instanceType can have a trunk ENI. A
// type the table does not know counts as compatible, as the controller
// and upstream ipamd treat it.
func TrunkingCompatible(instanceType string) bool {
	l, ok := rcvpc.Limits[instanceType]
	if !ok || l == nil {
		return true
	}
	return l.IsTrunkingCompatible
}

// BranchENIs is how many branch ENIs instanceType can have, and false for
// a type the table does not know.
func BranchENIs(instanceType string) (int, bool) {
	l, ok := rcvpc.Limits[instanceType]
	if !ok || l == nil {
		return 0, false
	}
	return l.BranchInterface, true
}
