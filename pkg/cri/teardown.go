package cri

import "strings"

// What a stopped sandbox's IPs prove. After StopPodSandbox (the CNI DEL has
// released the address) a sandbox stays listed NOTREADY until
// RemovePodSandbox, which for a Completed Job or an evicted pod comes when
// the pod object is deleted: days later. Runtimes differ in the IPs
// PodSandboxStatus reports for it (test/e2e's TestStoppedSandboxIPs holds
// each runtime of the matrix to what is written here):
//
//   - containerd (1.6, 2.x) reports a sandbox's IPs only while its network
//     namespace is open: none once StopPodSandbox has torn it down. A
//     NOTREADY sandbox that still reports IPs is being torn down, and its
//     IPs are evidence until then.
//   - CRI-O (1.34) reports the IPs its CNI ADD gave for as long as the
//     sandbox exists, after the DEL released them. A NOTREADY sandbox's
//     IPs say nothing about use. (The one NOTREADY CRI-O sandbox whose
//     network is still up, one whose infra container died before the
//     kubelet stopped it, holds its own allocation by its ID anyway.)

// runtimeCRIO is CRI-O's RuntimeName in its Version answer.
const runtimeCRIO = "cri-o"

// KeepsIPsAfterTeardown reports whether the runtime named runtimeName (its
// CRI Version RuntimeName) goes on reporting a sandbox's IPs after
// StopPodSandbox released them, so that the IPs of a sandbox that is not
// ready are no evidence that it uses them. False for containerd, for
// runtimes not known here and for an unknown name (""): their IPs count,
// the side that never frees an address in use.
func KeepsIPsAfterTeardown(runtimeName string) bool {
	return strings.EqualFold(runtimeName, runtimeCRIO)
}
