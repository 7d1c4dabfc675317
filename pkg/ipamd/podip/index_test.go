package podip

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
)

func TestIDIndex(t *testing.T) {
	ids := func(m map[string]struct{}) []string { return slices.Sorted(maps.Keys(m)) }
	var x idIndex
	a := []cri.Sandbox{{ID: "a"}, {ID: "b"}}
	assert.Equal(t, []string{"a", "b"}, ids(x.listed(a)))
	assert.Equal(t, []string{"a", "b"}, ids(x.listed(a)), "the same list again")

	// Another list of the same length is indexed afresh.
	b := []cri.Sandbox{{ID: "c"}, {ID: "d"}}
	assert.Equal(t, []string{"c", "d"}, ids(x.listed(b)))
	// So is a shorter view of the same array, and an empty list.
	assert.Equal(t, []string{"c"}, ids(x.listed(b[:1])))
	assert.Empty(t, ids(x.listed(nil)))

	// After forget, even the same list is indexed again (it may have been
	// reused memory of a new list).
	x.listed(a)
	x.forget()
	a[0].ID = "z"
	assert.Equal(t, []string{"b", "z"}, ids(x.listed(a)))

	held := x.reset()
	assert.Empty(t, held)
	assert.Equal(t, []string{"b", "z"}, ids(x.listed(a)), "reset forgets the list too")
}
