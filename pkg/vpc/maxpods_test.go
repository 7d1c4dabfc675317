package vpc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMaxPods(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    map[string]int
		wantErr []string // substrings the error must contain
	}{
		{
			name:  "empty",
			input: "",
			want:  map[string]int{},
		},
		{
			name: "header, blanks and whitespace",
			input: "# Mapping is calculated from AWS EC2 API\n" +
				"#   ENIs * (IPv4 per ENI - 1) + 2\n" +
				"\n" +
				"m5.large 29\n" +
				"  t3.medium\t17  \r\n" +
				"   # indented comment\n" +
				"\n" +
				"p5.48xlarge    100\n",
			want: map[string]int{"m5.large": 29, "t3.medium": 17, "p5.48xlarge": 100},
		},
		{
			name:  "no trailing newline",
			input: "a1.medium 8",
			want:  map[string]int{"a1.medium": 8},
		},
		{
			name:    "too many fields",
			input:   "# header\nm5.large 29\nt3.medium 17 extra\n",
			wantErr: []string{"line 3", "expected 2 fields", "got 3"},
		},
		{
			name:    "too few fields",
			input:   "m5.large 29\n\nt3.medium\n",
			wantErr: []string{"line 3", "got 1"},
		},
		{
			name:    "bad number",
			input:   "m5.large 29\nt3.medium seventeen\n",
			wantErr: []string{"line 2", "t3.medium", `"seventeen"`},
		},
		{
			name:    "negative number",
			input:   "m5.large -1\n",
			wantErr: []string{"line 1", `"-1"`},
		},
		{
			name:    "float",
			input:   "m5.large 29.5\n",
			wantErr: []string{"line 1"},
		},
		{
			name:    "duplicate",
			input:   "m5.large 29\n# x\nm5.large 30\n",
			wantErr: []string{"line 3", "duplicate", "line 1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMaxPods(strings.NewReader(tc.input))
			if tc.wantErr != nil {
				require.Error(t, err)
				assert.Nil(t, got)
				for _, s := range tc.wantErr {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestMaxPodsFromFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "eni-max-pods.txt")
	require.NoError(t, os.WriteFile(good, []byte("# header\nm5.large 29\nm5.large.x 7\nt3.medium 17\n"), 0o644))
	bad := filepath.Join(dir, "bad.txt")
	require.NoError(t, os.WriteFile(bad, []byte("m5.large 29\nbroken\n"), 0o644))
	missing := filepath.Join(dir, "nope.txt")

	tests := []struct {
		name         string
		path         string
		instanceType string
		want         int
		wantErr      []string
		is           error
	}{
		{name: "found", path: good, instanceType: "m5.large", want: 29},
		{name: "found other", path: good, instanceType: "t3.medium", want: 17},
		{name: "exact match only", path: good, instanceType: "m5.larg", wantErr: []string{`"m5.larg"`, good}, is: ErrInstanceTypeNotFound},
		{name: "case sensitive", path: good, instanceType: "M5.LARGE", is: ErrInstanceTypeNotFound},
		{name: "absent", path: good, instanceType: "m99.huge", wantErr: []string{"m99.huge", "not found"}, is: ErrInstanceTypeNotFound},
		{name: "empty type", path: good, instanceType: "", wantErr: []string{"empty instance type"}},
		{name: "missing file", path: missing, instanceType: "m5.large", wantErr: []string{missing}, is: fs.ErrNotExist},
		{name: "malformed file", path: bad, instanceType: "m5.large", wantErr: []string{"line 2", bad}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MaxPodsFromFile(tc.path, tc.instanceType)
			if tc.wantErr != nil || tc.is != nil {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					assert.Contains(t, err.Error(), s)
				}
				if tc.is != nil {
					assert.True(t, errors.Is(err, tc.is), "errors.Is(%v, %v)", err, tc.is)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
