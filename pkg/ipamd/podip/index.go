package podip

import "github.com/aws/amazon-vpc-cni-k8s/pkg/cri"

// idIndex is a set of container IDs refilled in place: clear keeps the
// map's buckets, so the sets a pass needs cost no allocation on a steady
// node. A pass asks for the set of one sandbox list several times
// (verification, candidates, the reverse check), and it is built once.
type idIndex struct {
	ids map[string]struct{}
	// of is the list the set was built from, kept only to recognise it.
	of []cri.Sandbox
}

// listed returns the IDs of sandboxes, reusing the set when it was built
// from this very list.
func (x *idIndex) listed(sandboxes []cri.Sandbox) map[string]struct{} {
	if len(sandboxes) > 0 && len(sandboxes) == len(x.of) && &sandboxes[0] == &x.of[0] {
		return x.ids
	}
	x.reset()
	for _, s := range sandboxes {
		x.ids[s.ID] = struct{}{}
	}
	x.of = sandboxes
	return x.ids
}

// forget drops the reference to the list (so it is not kept alive
// between passes); the next call builds the set again.
func (x *idIndex) forget() { x.of = nil }

// reset empties the set and forgets the list it was built from.
func (x *idIndex) reset() map[string]struct{} {
	if x.ids == nil {
		x.ids = make(map[string]struct{})
	}
	clear(x.ids)
	x.of = nil
	return x.ids
}
