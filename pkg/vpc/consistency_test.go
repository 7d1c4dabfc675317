package vpc

import (
	"os"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxKnownMaxPodsDisagreements is the number of instance types for which the
// shipped misc/eni-max-pods.txt carries a manual override of the formula
// (observed when the data was imported). It must not grow silently: a new
// disagreement means the two data files went out of sync.
const maxKnownMaxPodsDisagreements = 0

// TestShippedMaxPodsFileMatchesTable checks the shipped max-pods file against
// the generated table: the same set of instance types, and the formula
// agreeing with the file except for (a bounded number of) overrides.
func TestShippedMaxPodsFileMatchesTable(t *testing.T) {
	f, err := os.Open("../../misc/eni-max-pods.txt")
	require.NoError(t, err)
	defer f.Close()
	file, err := ParseMaxPods(f)
	require.NoError(t, err)

	var missingFromFile, missingFromTable, disagree []string
	for _, e := range limitsTable {
		typ, l := e.Type, e.Limits
		v, ok := file[typ]
		if !ok {
			missingFromFile = append(missingFromFile, typ)
			continue
		}
		if l.MaxPods() != v {
			disagree = append(disagree, typ)
		}
	}
	for typ := range file {
		if _, ok := Lookup(typ); !ok {
			missingFromTable = append(missingFromTable, typ)
		}
	}
	sort.Strings(missingFromFile)
	sort.Strings(missingFromTable)
	sort.Strings(disagree)

	assert.Equal(t, len(limitsTable), len(file), "table and max-pods file sizes")
	assert.Empty(t, missingFromFile, "types in the table but not in misc/eni-max-pods.txt")
	assert.Empty(t, missingFromTable, "types in misc/eni-max-pods.txt but not in the table")

	for _, typ := range disagree {
		t.Logf("max-pods override: %s formula=%d file=%d", typ, mustLookup(t, typ).MaxPods(), file[typ])
	}
	t.Logf("%d of %d types compared, %d disagree", len(limitsTable)-len(missingFromFile), len(limitsTable), len(disagree))
	assert.LessOrEqual(t, len(disagree), maxKnownMaxPodsDisagreements,
		"formula and misc/eni-max-pods.txt disagree for: %v", disagree)
}

func mustLookup(t *testing.T, typ string) Limits {
	t.Helper()
	l, ok := Lookup(typ)
	require.True(t, ok, typ)
	return l
}
