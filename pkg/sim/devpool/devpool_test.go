package devpool

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	p, err := Parse("3x10")
	require.NoError(t, err)
	assert.Equal(t, Pool{ENIs: 3, PerENI: 10}, p)
	for _, bad := range []string{"", "3", "x10", "0x10", "3x0", "3x-1", "101x1", "axb"} {
		_, err := Parse(bad)
		assert.Error(t, err, bad)
	}
}
