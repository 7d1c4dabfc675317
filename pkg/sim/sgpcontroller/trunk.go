package sgpcontroller

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/types"
)

// trunkState is the node's trunk ENI as far as the controller has got.
type trunkState struct {
	id, mac    string
	attaching  bool // AttachNetworkInterface answered, not complete yet
	attached   bool
	advertised bool // the Node shows vpc.amazonaws.com/pod-eni
}

// Trunk is the node's trunk ENI once its attachment has completed.
func (c *Controller) Trunk() (eniID, mac string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trunk.id, c.trunk.mac, c.trunk.attached
}

// ensureTrunk takes the trunk one step further: find or create it,
// attach it, wait for the attachment, advertise the node's resource.
func (c *Controller) ensureTrunk(ctx context.Context) error {
	c.mu.Lock()
	t := c.trunk
	c.mu.Unlock()
	if t.advertised {
		return nil
	}
	if t.id == "" {
		found, err := c.findOrCreateTrunk(ctx)
		if err != nil {
			return err
		}
		t.id, t.mac = aws.ToString(found.NetworkInterfaceId), aws.ToString(found.MacAddress)
		t.attaching = found.Attachment != nil
		c.setTrunk(t)
	}
	if !t.attaching {
		if err := c.attachTrunk(ctx, t.id); err != nil {
			return err
		}
		t.attaching = true
		c.setTrunk(t)
	}
	if !t.attached {
		eni, err := describeENI(ctx, c.opts.EC2, t.id)
		if err != nil {
			return err
		}
		if eni.Attachment == nil || eni.Attachment.Status != ec2types.AttachmentStatusAttached {
			return errWait
		}
		t.attached = true
		c.setTrunk(t)
		c.opts.Logger.Info("sgpcontroller: trunk attached", "eni", t.id, "device", aws.ToInt32(eni.Attachment.DeviceIndex))
		c.requeuePods() // pods that came before the trunk
	}
	if err := c.advertise(ctx); err != nil {
		return err
	}
	t.advertised = true
	c.setTrunk(t)
	return nil
}

func (c *Controller) setTrunk(t trunkState) {
	c.mu.Lock()
	c.trunk = t
	c.mu.Unlock()
}

// findOrCreateTrunk returns the instance's trunk if it has one (a
// restarted controller), else a new one.
func (c *Controller) findOrCreateTrunk(ctx context.Context) (ec2types.NetworkInterface, error) {
	enis, err := instanceENIs(ctx, c.opts.EC2, c.opts.InstanceID)
	if err != nil {
		return ec2types.NetworkInterface{}, err
	}
	for _, e := range enis {
		if e.InterfaceType == ec2types.NetworkInterfaceTypeTrunk {
			return e, nil
		}
	}
	out, err := c.opts.EC2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(c.opts.SubnetID), InterfaceType: ec2types.NetworkInterfaceCreationTypeTrunk,
		Description: aws.String(trunkDescription), Groups: c.opts.SecurityGroups})
	if err != nil {
		return ec2types.NetworkInterface{}, fmt.Errorf("create trunk ENI: %w", err)
	}
	c.opts.Logger.Info("sgpcontroller: trunk created", "eni", aws.ToString(out.NetworkInterface.NetworkInterfaceId))
	return *out.NetworkInterface, nil
}

// attachTrunk attaches the trunk at the next free device index of network
// card 0. Another actor (ipamd) may take that index first: the attach
// then fails and the step is retried with a fresh look.
func (c *Controller) attachTrunk(ctx context.Context, id string) error {
	enis, err := instanceENIs(ctx, c.opts.EC2, c.opts.InstanceID)
	if err != nil {
		return err
	}
	used := map[int32]bool{}
	for _, e := range enis {
		if a := e.Attachment; a != nil && aws.ToInt32(a.NetworkCardIndex) == 0 {
			used[aws.ToInt32(a.DeviceIndex)] = true
		}
	}
	device := nextDeviceIndex(used)
	_, err = c.opts.EC2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(id),
		InstanceId: aws.String(c.opts.InstanceID), DeviceIndex: aws.Int32(device), NetworkCardIndex: aws.Int32(0)})
	if err != nil {
		return fmt.Errorf("attach trunk %s at device %d: %w", id, device, err)
	}
	return nil
}

// advertise sets vpc.amazonaws.com/pod-eni on the Node's capacity and
// allocatable.
func (c *Controller) advertise(ctx context.Context) error {
	n := fmt.Sprint(c.opts.BranchLimit)
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{
		"capacity":    map[string]string{string(PodENIResource): n},
		"allocatable": map[string]string{string(PodENIResource): n},
	}})
	if _, err := c.kube.CoreV1().Nodes().Patch(ctx, c.opts.NodeName, types.MergePatchType, patch, metav1PatchOptions, "status"); err != nil {
		return fmt.Errorf("advertise %s on node %s: %w", PodENIResource, c.opts.NodeName, err)
	}
	return nil
}

// requeuePods queues every pod of the node still waiting for a branch.
func (c *Controller) requeuePods() {
	for _, key := range c.pods.ListKeys() {
		c.queue.Add(work{kind: workPod, key: key})
	}
}
