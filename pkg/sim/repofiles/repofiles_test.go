package repofiles

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMaxPodsFileFromASubdirectory(t *testing.T) {
	p := MaxPodsFile()
	require.NotEmpty(t, p, "found from pkg/sim/repofiles")
	_, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, "eni-max-pods.txt", filepath.Base(p))

	t.Chdir(t.TempDir())
	assert.Empty(t, MaxPodsFile(), "outside the repository: none")
}
