package awsutils

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// reservedTagText marks tag keys ADDITIONAL_ENI_TAGS may not set: upstream
// keeps every key containing it for itself.
const reservedTagText = "k8s.amazonaws.com"

// OwnerTagValue is the value of the eks:eni:owner tag.
const OwnerTagValue = "amazon-vpc-cni"

// AdditionalENITags keeps the ADDITIONAL_ENI_TAGS entries ipamd may set and
// returns the keys it drops (those containing "k8s.amazonaws.com"),
// sorted, for the caller to warn about.
func AdditionalENITags(in map[string]string) (kept map[string]string, dropped []string) {
	kept = make(map[string]string, len(in))
	for k, v := range in {
		if strings.Contains(k, reservedTagText) {
			dropped = append(dropped, k)
			continue
		}
		kept[k] = v
	}
	sort.Strings(dropped)
	return kept, dropped
}

// ownTags are the tags every ENI ipamd manages carries, createdAt aside:
// the instance ID, the cluster tags when CLUSTER_NAME is set, and
// ADDITIONAL_ENI_TAGS (never overriding the others).
func (c *Client) ownTags() map[string]string {
	tags := map[string]string{TagInstanceID: c.Identity.InstanceID}
	if c.opts.ClusterName != "" {
		tags[TagCluster] = c.opts.ClusterName
		tags[TagOwner] = OwnerTagValue
	}
	extra, _ := AdditionalENITags(c.opts.AdditionalTags)
	for k, v := range extra {
		if _, taken := tags[k]; !taken {
			tags[k] = v
		}
	}
	return tags
}

// newENITags are the tags of an ENI being created: ownTags plus createdAt.
func (c *Client) newENITags() []types.Tag {
	tags := c.ownTags()
	tags[TagCreatedAt] = time.Now().UTC().Format(time.RFC3339)
	return sdkTags(tags)
}

// EnsureENITags gives a managed ENI the tags ipamd's own ENIs carry,
// sending only the keys that are missing or differ (createdAt is only set
// at creation). It makes no call when nothing is missing.
func (c *Client) EnsureENITags(ctx context.Context, e ENI) error {
	want := c.ownTags()
	for k, v := range want {
		if have, ok := e.Tags[k]; ok && have == v {
			delete(want, k)
		}
	}
	if len(want) == 0 {
		return nil
	}
	return c.TagENI(ctx, e.ID, want)
}

// TagENI sets tags on an ENI.
func (c *Client) TagENI(ctx context.Context, eniID string, tags map[string]string) error {
	_, err := ec2Call(ctx, "CreateTags", func(ctx context.Context) (*ec2.CreateTagsOutput, error) {
		return c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{eniID}, Tags: sdkTags(tags)})
	})
	return err
}

// sdkTags turns a map into SDK tags, sorted by key.
func sdkTags(m map[string]string) []types.Tag {
	out := make([]types.Tag, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}
