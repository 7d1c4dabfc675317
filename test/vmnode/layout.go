// Package vmnode runs a whole node's datapath for a branch-ENI (security
// groups for pods) pod inside the VM harness's kernel (test/vmkernel): a
// real containerd 2.x with runc, a locally imported pause image, and this
// repository's aws-cni chained in the conflist the aws-node entrypoint
// writes, in strict mode, against an ipamd stand-in that answers with a
// branch-ENI reply. The pod is created and removed over the CRI, as the
// kubelet does.
//
// Its tests run only in the guest (AWS_VPC_CNI_IN_VM=1) and skip elsewhere;
// in the guest a missing file fails them. The guest's root network
// namespace is the node (the VM has no network device of its own); the
// VPC behind the trunk and primary ENIs is a namespace the test creates.
// The host side that builds and ships the files is in test/vmkernel
// (vmnode_test.go); this file is the layout both agree on.
package vmnode

// Paths in the guest of the files the host ships (test/vmkernel's
// ExtraFiles).
const (
	// NodeBin holds containerd, containerd-shim-runc-v2 and ctr.
	NodeBin = "/vmtest/node/bin"
	// Runc is the host's runc; its library beyond libc is Libseccomp.
	Runc       = "/usr/sbin/runc"
	Libseccomp = "/usr/lib/x86_64-linux-gnu/libseccomp.so.2"
	// CNIBin holds aws-cni, egress-cni, loopback, host-local and portmap,
	// where the chart's init container puts them on a node.
	CNIBin = "/opt/cni/bin"
	// ConflistTemplate is misc/10-aws.conflist.
	ConflistTemplate = "/vmtest/node/10-aws.conflist"
	// PauseTar is the pause image, a docker-archive tagged PauseImage.
	PauseTar = "/vmtest/node/pause.tar"
)

// PauseImage is the sandbox image's reference; it exists only locally.
const PauseImage = "vmnode.local/pause:1"

// CNIBinaries are the files of CNIBin.
var CNIBinaries = []string{"aws-cni", "egress-cni", "loopback", "host-local", "portmap"}

// NodeBinaries are the files of NodeBin.
var NodeBinaries = []string{"containerd", "containerd-shim-runc-v2", "ctr"}
