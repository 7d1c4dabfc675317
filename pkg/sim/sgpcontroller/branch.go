package sgpcontroller

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var metav1PatchOptions = metav1.PatchOptions{FieldManager: "sgpcontroller"}

// Branch is the branch ENI the controller holds for a pod (still while
// it cools down after the pod went).
func (c *Controller) Branch(podUID types.UID) (PodENI, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.branches[podUID]
	return b, ok
}

// Branches is how many branch ENIs the controller holds.
func (c *Controller) Branches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.branches)
}

// ensureBranch gives the pod (namespace/name) a branch ENI and its
// annotation, once the trunk is attached.
func (c *Controller) ensureBranch(ctx context.Context, key string) error {
	obj, exists, err := c.pods.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod)
	if !needsBranch(pod) {
		return nil
	}
	c.mu.Lock()
	trunk := c.trunk
	b, has := c.branches[pod.UID]
	full := len(c.branches) >= c.opts.BranchLimit
	c.mu.Unlock()
	if !trunk.attached {
		return errWait // requeued by ensureTrunk once it is
	}
	if !has {
		if full {
			return fmt.Errorf("pod %s: the node's %d branches are all taken", key, c.opts.BranchLimit)
		}
		if b, err = c.newBranch(ctx, trunk.id, pod.UID); err != nil {
			return fmt.Errorf("pod %s: %w", key, err)
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         pod.UID, // a precondition: never annotate a namesake
		"annotations": map[string]string{PodENIAnnotation: annotationValue(b)},
	}})
	_, err = c.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1PatchOptions)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// The pod went while its branch was made: give it back now.
		c.queue.Add(work{kind: workRelease, key: string(pod.UID)})
		return nil
	case err != nil:
		return fmt.Errorf("annotate pod %s: %w", key, err)
	}
	c.opts.Logger.Info("sgpcontroller: pod annotated", "pod", key, "eni", b.ENIID, "vlan", b.VlanID)
	return nil
}

// newBranch creates a branch ENI, associates it with the trunk at the
// next free VLAN ID and records it for the pod. A branch that cannot be
// associated is deleted.
func (c *Controller) newBranch(ctx context.Context, trunkID string, uid types.UID) (PodENI, error) {
	c.mu.Lock()
	vlan := nextVLAN(c.vlans)
	c.mu.Unlock()
	if vlan == 0 {
		return PodENI{}, fmt.Errorf("no free VLAN ID on trunk %s", trunkID)
	}
	in := &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(c.opts.SubnetID),
		InterfaceType: ec2types.NetworkInterfaceCreationTypeBranch, Description: aws.String(branchDescription),
		Groups: c.opts.SecurityGroups}
	if c.opts.IPv6 {
		in.Ipv6AddressCount = aws.Int32(1)
	}
	out, err := c.opts.EC2.CreateNetworkInterface(ctx, in)
	if err != nil {
		return PodENI{}, fmt.Errorf("create branch ENI: %w", err)
	}
	eni := out.NetworkInterface
	id := aws.ToString(eni.NetworkInterfaceId)
	assoc, err := c.opts.EC2.AssociateTrunkInterface(ctx, &ec2.AssociateTrunkInterfaceInput{
		BranchInterfaceId: aws.String(id), TrunkInterfaceId: aws.String(trunkID), VlanId: aws.Int32(int32(vlan))})
	if err != nil {
		_, _ = c.opts.EC2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
		return PodENI{}, fmt.Errorf("associate branch %s with trunk %s at VLAN %d: %w", id, trunkID, vlan, err)
	}
	b := PodENI{ENIID: id, IfAddress: aws.ToString(eni.MacAddress), PrivateIP: aws.ToString(eni.PrivateIpAddress),
		VlanID: vlan, SubnetCIDR: c.subnet.v4, AssociationID: aws.ToString(assoc.InterfaceAssociation.AssociationId)}
	if c.opts.IPv6 && len(eni.Ipv6Addresses) > 0 {
		b.IPv6Addr, b.SubnetV6CIDR = aws.ToString(eni.Ipv6Addresses[0].Ipv6Address), c.subnet.v6
	}
	c.mu.Lock()
	c.branches[uid] = b
	c.vlans[vlan] = true
	c.mu.Unlock()
	c.opts.Logger.Info("sgpcontroller: branch associated", "eni", id, "trunk", trunkID, "vlan", vlan)
	return b, nil
}

// release disassociates and deletes a gone pod's branch ENI and frees its
// VLAN ID. Either already done (a retry) counts as done.
func (c *Controller) release(ctx context.Context, uid types.UID) error {
	c.mu.Lock()
	b, ok := c.branches[uid]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	if _, err := c.opts.EC2.DisassociateTrunkInterface(ctx, &ec2.DisassociateTrunkInterfaceInput{
		AssociationId: aws.String(b.AssociationID)}); err != nil && !isNotFound(err) {
		return fmt.Errorf("disassociate branch %s: %w", b.ENIID, err)
	}
	if _, err := c.opts.EC2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{
		NetworkInterfaceId: aws.String(b.ENIID)}); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete branch %s: %w", b.ENIID, err)
	}
	c.mu.Lock()
	delete(c.branches, uid)
	delete(c.vlans, b.VlanID)
	c.mu.Unlock()
	c.opts.Logger.Info("sgpcontroller: branch deleted", "eni", b.ENIID, "vlan", b.VlanID)
	c.requeuePods() // a pod beyond the limit may have its turn
	return nil
}
