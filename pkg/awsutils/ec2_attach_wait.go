package awsutils

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/ctxtime"
)

// defaultAttachWait bounds how long WaitAttached watches IMDS for a new
// ENI before it asks EC2 once. EC2 attaches an ENI in seconds; IMDS shows
// it soon after.
const defaultAttachWait = 60 * time.Second

// createdENIs are the ENIs AllocENI made, as CreateNetworkInterface and
// AttachNetworkInterface described them, kept until WaitAttached sees each
// attached: EC2's own answer about them needs no second describe.
type createdENIs struct {
	mu   sync.Mutex
	enis map[string]ENI
}

func (c *createdENIs) add(e ENI) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.enis == nil {
		c.enis = map[string]ENI{}
	}
	c.enis[e.ID] = e
}

func (c *createdENIs) take(id string) (ENI, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.enis[id]
	delete(c.enis, id)
	return e, ok
}

// WaitAttached waits until an ENI's attachment completes. For an ENI this
// client created it watches IMDS (free, and not subject to EC2's request
// limits) until the instance shows the ENI with every address EC2 gave it,
// as upstream does; only if IMDS has not shown it within a minute
// does it ask EC2, once. Any other ENI is polled on EC2 with backoff.
func (c *Client) WaitAttached(ctx context.Context, eniID string) (ENI, error) {
	created, ok := c.created.take(eniID)
	if !ok {
		return c.pollEC2Attached(ctx, eniID)
	}
	md, err := c.watchIMDSAttached(ctx, created)
	if err == nil {
		created.Attached, created.AttachmentStatus, created.Status = true, "attached", "in-use"
		created.AttachedTo = c.Identity.InstanceID
		created.DeviceNumber, created.NetworkCard = md.DeviceNumber, md.NetworkCard
		return created, nil
	}
	if ctx.Err() != nil {
		return ENI{}, ctx.Err()
	}
	c.log.Warn("IMDS did not show the new ENI attached in time; asking EC2", "eni", eniID, "error", err)
	enis, derr := c.DescribeENIs(ctx, []string{eniID})
	if derr == nil && len(enis) == 1 && enis[0].Attached {
		return enis[0], nil
	}
	if derr == nil {
		derr = errors.New("still not attached")
	}
	return ENI{}, fmt.Errorf("wait for %s to attach: %w", eniID, derr)
}

// watchIMDSAttached polls IMDS until the ENI's MAC is listed with its ID
// and at least the addresses and prefixes EC2 created it with.
func (c *Client) watchIMDSAttached(ctx context.Context, want ENI) (ENIMetadata, error) {
	limit := c.attachWait
	if limit <= 0 {
		limit = defaultAttachWait
	}
	deadline := time.Now().Add(limit)
	delay := 100 * time.Millisecond
	for {
		md, err := c.imdsShows(ctx, want)
		if err == nil {
			return md, nil
		}
		if time.Now().After(deadline) {
			return ENIMetadata{}, err
		}
		if err := ctxtime.Sleep(ctx, delay); err != nil {
			return ENIMetadata{}, err
		}
		delay = min(2*delay, time.Second)
	}
}

var errNotInIMDSYet = errors.New("not in IMDS yet")

// imdsShows reads the ENI's IMDS entry once.
func (c *Client) imdsShows(ctx context.Context, want ENI) (ENIMetadata, error) {
	macs, err := c.get(ctx, "network/interfaces/macs")
	if err != nil {
		return ENIMetadata{}, err
	}
	if listsMAC(macs, want.MAC) {
		md, err := c.eniMetadata(ctx, want.MAC)
		if err != nil {
			return md, err
		}
		if md.ENIID != want.ID || len(md.SecondaryIPs) < len(want.SecondaryIPs) || len(md.Prefixes) < len(want.Prefixes) {
			return md, fmt.Errorf("%w: IMDS shows %s with %d of %d addresses and %d of %d prefixes", errNotInIMDSYet,
				md.ENIID, len(md.SecondaryIPs), len(want.SecondaryIPs), len(md.Prefixes), len(want.Prefixes))
		}
		return md, nil
	}
	return ENIMetadata{}, fmt.Errorf("%w: MAC %s not listed", errNotInIMDSYet, want.MAC)
}

// listsMAC reports whether IMDS's list of MACs ("mac/" per line) has mac.
func listsMAC(macs, mac string) bool {
	for _, m := range strings.Fields(macs) {
		if strings.EqualFold(strings.TrimSuffix(m, "/"), mac) {
			return true
		}
	}
	return false
}

// pollEC2Attached polls EC2 until the ENI's attachment completes, with
// backoff (an ENI this client did not create).
func (c *Client) pollEC2Attached(ctx context.Context, eniID string) (ENI, error) {
	delay := 100 * time.Millisecond
	for try := 0; ; try++ {
		enis, err := c.DescribeENIs(ctx, []string{eniID})
		if err == nil && len(enis) == 1 && enis[0].Attached {
			return enis[0], nil
		}
		if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrNotFound) || try >= 12 {
			if err == nil {
				err = errors.New("still not attached")
			}
			return ENI{}, fmt.Errorf("wait for %s to attach: %w", eniID, err)
		}
		if err := ctxtime.Sleep(ctx, delay); err != nil {
			return ENI{}, err
		}
		delay = min(2*delay, 5*time.Second)
	}
}
