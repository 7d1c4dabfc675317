// Package sgpcontroller is a test stand-in for the VPC resource controller,
// the separate AWS component (run by EKS, not part of aws-node) that
// manages trunk and branch ENIs for security groups for pods. It is never
// in the image: only tests and test harnesses import it (test/imports
// keeps production code off pkg/sim).
//
// It does, for one node, what the real controller does and what aws-node
// depends on, talking to a real kube-apiserver with client-go and to EC2
// (the simulator, pkg/sim/ec2sim) with the AWS SDK:
//
//   - it installs the CNINode CRD (vpcresources.k8s.aws/v1alpha1,
//     cluster-scoped, plural cninodes) when the server lacks it, and
//     creates the node's CNINode (named after the node);
//   - once the CNINode's spec.features names SecurityGroupsForPods (ipamd
//     adds it), it creates a trunk ENI in the node's subnet, attaches it at
//     the instance's next free device index on network card 0, waits for
//     the attachment, and advertises the extended resource
//     vpc.amazonaws.com/pod-eni on the Node's capacity and allocatable
//     (Options.BranchLimit);
//   - for each pod on the node whose first container's limits or requests
//     name vpc.amazonaws.com/pod-eni, it creates a branch ENI, associates
//     it with the trunk at the lowest free VLAN ID (from 1), and sets the
//     pod's vpc.amazonaws.com/pod-eni annotation (PodENI, a JSON array of
//     one object);
//   - when such a pod is deleted, after Options.BranchCooldown (the real
//     default is 60 s, branchENICooldown) it disassociates and deletes the
//     branch ENI, and its VLAN ID is free again.
//
// Not modelled: SecurityGroupPolicy objects (every branch gets
// Options.SecurityGroups), more than one branch per pod, custom
// networking's subnets for branches, the controller's restart recovery
// (state is in memory; pending cooldowns are dropped by Stop), and
// Windows.
//
// It never imports pkg/ipamd/...: it meets ipamd only through the API
// server and EC2, as the real controller does.
package sgpcontroller
