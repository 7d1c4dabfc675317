package ec2sim

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
)

// Category is how EC2 groups actions for request rate limiting. Each
// action still has a bucket of its own; the category only gives its size.
type Category int

const (
	// NonMutating actions read (Describe*, List*, Search*, Get*).
	NonMutating Category = iota + 1
	// UnfilteredNonMutating is a request for one of a few listed
	// Describe* actions (of those modelled here DescribeInstances and
	// DescribeNetworkInterfaces) that asks for everything: no filter, no
	// pagination and (our reading, EC2 does not say) no IDs.
	UnfilteredNonMutating
	// Mutating actions create, modify or delete.
	Mutating
	// Uncategorized actions are those EC2 lists with a bucket of their
	// own (ThrottleConfig.Actions), whatever their nature.
	Uncategorized
)

var categoryNames = map[Category]string{
	NonMutating:           "non-mutating",
	UnfilteredNonMutating: "unfiltered-non-mutating",
	Mutating:              "mutating",
	Uncategorized:         "uncategorized",
}

func (c Category) String() string {
	if n, ok := categoryNames[c]; ok {
		return n
	}
	return fmt.Sprintf("Category(%d)", int(c))
}

// ThrottleConfig sets the request limits of one account (per Region).
// Every action has its own bucket: its entry in Actions if it has one,
// otherwise one shaped like its category's entry in Categories. A request
// that no entry covers is not limited.
type ThrottleConfig struct {
	Categories map[Category]Bucket
	Actions    map[string]Bucket // per-action buckets, as EC2's uncategorized list
}

// The figures EC2 publishes for request token buckets ("Request
// throttling for the Amazon EC2 API", EC2 Developer Guide,
// https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html).
// publishedActions holds the uncategorized rows for the actions the
// simulator implements; AttachNetworkInterface, DetachNetworkInterface and
// UnassignIpv6Addresses are not listed there, so they are plain mutating.
var (
	publishedCategories = map[Category]Bucket{
		NonMutating:           {Capacity: 100, RefillPerSecond: 20},
		UnfilteredNonMutating: {Capacity: 50, RefillPerSecond: 10},
		Mutating:              {Capacity: 50, RefillPerSecond: 5},
	}
	publishedActions = map[string]Bucket{
		"AssignIpv6Addresses":             {Capacity: 100, RefillPerSecond: 5},
		"AssignPrivateIpAddresses":        {Capacity: 100, RefillPerSecond: 5},
		"UnassignPrivateIpAddresses":      {Capacity: 100, RefillPerSecond: 5},
		"CreateNetworkInterface":          {Capacity: 100, RefillPerSecond: 5},
		"DeleteNetworkInterface":          {Capacity: 100, RefillPerSecond: 5},
		"ModifyNetworkInterfaceAttribute": {Capacity: 100, RefillPerSecond: 5},
		"CreateTags":                      {Capacity: 100, RefillPerSecond: 10},
	}
	// unfilteredActions are the listed Describe* actions that draw on the
	// smaller bucket when asked for everything; the simulator implements
	// the first two (the others are listed for CategoryOf).
	unfilteredActions = map[string]bool{
		"DescribeInstances": true, "DescribeNetworkInterfaces": true,
		"DescribeInstanceStatus": true, "DescribeSecurityGroups": true, "DescribeSnapshots": true,
		"DescribeSpotInstanceRequests": true, "DescribeVolumes": true,
	}
)

// DefaultThrottle returns EC2's published default request limits for the
// actions the simulator implements (a fresh copy each call).
func DefaultThrottle() *ThrottleConfig {
	c := ThrottleConfig{Categories: publishedCategories, Actions: publishedActions}
	return c.clone()
}

// CategoryOf classifies one request as EC2 does for rate limiting, from
// its action and Query parameters. It is a pure function.
func CategoryOf(action string, form url.Values) Category {
	if _, ok := publishedActions[action]; ok {
		return Uncategorized
	}
	if mutating(action) {
		return Mutating
	}
	if unfilteredActions[action] && !narrowed(form) {
		return UnfilteredNonMutating
	}
	return NonMutating
}

// mutating is an action's nature: what the simulator implements says so
// itself; any other name is read-only if it reads like it.
func mutating(action string) bool {
	if def, ok := actions[action]; ok {
		return def.mutates
	}
	for _, p := range []string{"Describe", "List", "Search", "Get"} {
		if strings.HasPrefix(action, p) {
			return false
		}
	}
	return true
}

// narrowed reports whether a describe request filters, paginates or names
// IDs. EC2's definition names filters and pagination; that a list of IDs
// narrows the request too is our reading (it makes the request as cheap).
func narrowed(form url.Values) bool {
	for k, v := range form {
		if len(v) == 0 || v[0] == "" {
			continue
		}
		if k == "MaxResults" || k == "NextToken" || strings.HasPrefix(k, "Filter.") {
			return true
		}
		if name, _, ok := strings.Cut(k, "."); ok && strings.HasSuffix(name, "Id") {
			return true // InstanceId.1, NetworkInterfaceId.1, ...
		}
	}
	return false
}

// bucketFor names and shapes the bucket a request of the action in the
// category draws on; ok is false when none applies. An uncategorized
// action without its own entry falls back to the category of its nature.
func (c *ThrottleConfig) bucketFor(action string, cat Category) (key string, b Bucket, ok bool) {
	if b, ok := c.Actions[action]; ok {
		return action, b, true
	}
	if cat == Uncategorized {
		cat = NonMutating
		if mutating(action) {
			cat = Mutating
		}
	}
	b, ok = c.Categories[cat]
	return action + "/" + cat.String(), b, ok
}

func (c *ThrottleConfig) clone() *ThrottleConfig {
	out := &ThrottleConfig{Categories: map[Category]Bucket{}, Actions: map[string]Bucket{}}
	for k, v := range c.Categories {
		out.Categories[k] = v
	}
	for k, v := range c.Actions {
		out.Actions[k] = v
	}
	return out
}

// validate rejects buckets that cannot work and names that match nothing
// (a typo would otherwise silently leave an action unlimited).
func (c *ThrottleConfig) validate() error {
	check := func(what string, b Bucket) error {
		if b.Capacity < 1 {
			return fmt.Errorf("%s: capacity %d, want at least 1", what, b.Capacity)
		}
		if b.RefillPerSecond < 0 || math.IsNaN(b.RefillPerSecond) || math.IsInf(b.RefillPerSecond, 0) {
			return fmt.Errorf("%s: refill %v per second, want a finite rate >= 0", what, b.RefillPerSecond)
		}
		return nil
	}
	for cat, b := range c.Categories {
		if _, ok := categoryNames[cat]; !ok || cat == Uncategorized {
			return fmt.Errorf("throttle: %v is not a category with a shared size", cat)
		}
		if err := check("throttle category "+cat.String(), b); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(c.Actions))
	for a := range c.Actions {
		names = append(names, a)
	}
	sort.Strings(names) // report the same one every time
	for _, a := range names {
		if _, ok := actions[a]; !ok {
			return fmt.Errorf("throttle: action %q is not implemented by ec2sim (known: %v)", a, Actions())
		}
		if err := check("throttle action "+a, c.Actions[a]); err != nil {
			return err
		}
	}
	return nil
}
