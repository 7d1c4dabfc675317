package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	repoTSV       = "../../misc/instance-limits.tsv"
	repoGenerated = "../../pkg/vpc/zz_generated_limits.go"
)

// The checked-in generated file must be exactly what the generator produces
// from the checked-in TSV; run `make generate-limits` if this fails.
func TestGeneratedFileUpToDate(t *testing.T) {
	want, err := os.ReadFile(repoGenerated)
	require.NoError(t, err)
	got, err := generateFile(repoTSV)
	require.NoError(t, err)
	if !bytes.Equal(want, got) {
		t.Fatalf("%s is stale: regenerate with `make generate-limits` (generated %d bytes, file has %d)",
			repoGenerated, len(got), len(want))
	}
	assert.True(t, bytes.HasPrefix(got, []byte(header+"\n")))
}

// Running the command end to end (flags, file write) yields the same bytes.
func TestRunWritesFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "zz_generated_limits.go")
	var stderr bytes.Buffer
	require.NoError(t, run([]string{"-in", repoTSV, "-out", out}, &stderr))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	want, err := os.ReadFile(repoGenerated)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "run output differs from %s", repoGenerated)

	entries, err := os.ReadDir(filepath.Dir(out))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary files left behind")
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.tsv")
	require.NoError(t, os.WriteFile(bad, []byte("# header\nm5.large\t3\t10\t0\t0:3\tnitro\tfalse\nt3.medium\t3\n"), 0o644))
	out := filepath.Join(dir, "out.go")

	tests := []struct {
		name    string
		args    []string
		wantErr []string
	}{
		{name: "missing input", args: []string{"-in", filepath.Join(dir, "nope.tsv"), "-out", out}, wantErr: []string{"nope.tsv"}},
		{name: "malformed input", args: []string{"-in", bad, "-out", out}, wantErr: []string{bad + ":3:", "expected 7"}},
		{name: "stray argument", args: []string{"-in", repoTSV, "-out", out, "extra"}, wantErr: []string{"unexpected arguments"}},
		{name: "unknown flag", args: []string{"-bogus"}, wantErr: []string{"bogus"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args, &bytes.Buffer{})
			require.Error(t, err)
			for _, s := range tc.wantErr {
				assert.Contains(t, err.Error(), s)
			}
			_, statErr := os.Stat(out)
			assert.True(t, os.IsNotExist(statErr), "nothing written on error")
		})
	}
}

func TestParseMalformed(t *testing.T) {
	const good = "m5.large\t3\t10\t0\t0:3\tnitro\tfalse"
	tests := []struct {
		name    string
		line    string
		wantErr []string
	}{
		{name: "too few columns", line: "m5.large\t3\t10\t0\t0:3\tnitro", wantErr: []string{"expected 7", "got 6"}},
		{name: "too many columns", line: good + "\textra", wantErr: []string{"got 8"}},
		{name: "spaces not tabs", line: "m5.large 3 10 0 0:3 nitro false", wantErr: []string{"got 1"}},
		{name: "empty type", line: "\t3\t10\t0\t0:3\tnitro\tfalse", wantErr: []string{"empty instance type"}},
		{name: "quote in type", line: "m5\".large\t3\t10\t0\t0:3\tnitro\tfalse", wantErr: []string{"invalid character"}},
		{name: "bad ENI limit", line: "m5.large\tthree\t10\t0\t0:3\tnitro\tfalse", wantErr: []string{"ENI limit", `"three"`}},
		{name: "zero ENI limit", line: "m5.large\t0\t10\t0\t0:0\tnitro\tfalse", wantErr: []string{"ENI limit", "minimum 1"}},
		{name: "bad IPv4", line: "m5.large\t3\t1.5\t0\t0:3\tnitro\tfalse", wantErr: []string{"IPv4 addresses per ENI"}},
		{name: "zero IPv4", line: "m5.large\t3\t0\t0\t0:3\tnitro\tfalse", wantErr: []string{"IPv4 addresses per ENI", "minimum 1"}},
		{name: "negative default card", line: "m5.large\t3\t10\t-1\t0:3\tnitro\tfalse", wantErr: []string{"default network card"}},
		{name: "empty cards", line: "m5.large\t3\t10\t0\t\tnitro\tfalse", wantErr: []string{"network cards", "empty list"}},
		{name: "card without colon", line: "m5.large\t3\t10\t0\t0-3\tnitro\tfalse", wantErr: []string{"network cards", `"0-3"`}},
		{name: "card bad max", line: "m5.large\t3\t10\t0\t0:x\tnitro\tfalse", wantErr: []string{"max ENIs"}},
		{name: "card bad index", line: "m5.large\t3\t10\t0\ta:3\tnitro\tfalse", wantErr: []string{"index"}},
		{name: "duplicate card", line: "m5.large\t3\t10\t0\t0:3,0:3\tnitro\tfalse", wantErr: []string{"listed twice"}},
		{name: "default card absent", line: "m5.large\t3\t10\t1\t0:3\tnitro\tfalse", wantErr: []string{"default network card 1 is not in"}},
		{name: "ENI limit not default card's", line: "p5.48xlarge\t64\t50\t0\t0:2,1:2\tnitro\tfalse", wantErr: []string{"ENI limit 64 differs", "max ENIs 2"}},
		{name: "empty hypervisor", line: "m5.large\t3\t10\t0\t0:3\t\tfalse", wantErr: []string{"hypervisor"}},
		{name: "odd hypervisor", line: "m5.large\t3\t10\t0\t0:3\tNitro\tfalse", wantErr: []string{"hypervisor \"Nitro\""}},
		{name: "bad bare metal", line: "m5.large\t3\t10\t0\t0:3\tnitro\tyes", wantErr: []string{"bare metal", `"yes"`}},
		{name: "duplicate type", line: good, wantErr: []string{"duplicate instance type", "first seen on line 2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The bad line is line 3: header, one good line, then the bad one.
			input := "# header\n" + good + "\n" + tc.line + "\n" + "t3.medium\t3\t6\t0\t0:3\tnitro\tfalse\n"
			recs, err := parse(strings.NewReader(input))
			require.Error(t, err)
			assert.Nil(t, recs)
			assert.True(t, strings.HasPrefix(err.Error(), "3: "), "error %q should start with the line number", err)
			for _, s := range tc.wantErr {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestParseEmpty(t *testing.T) {
	_, err := parse(strings.NewReader("# only a header\n\n"))
	require.ErrorContains(t, err, "no instance types")
}

func TestRenderSmall(t *testing.T) {
	input := "# header\r\n" +
		"z1.large\t2\t4\t0\t0:2\txen\tfalse\r\n" +
		"\n" +
		"a1.metal\t8\t30\t0\t0:8,1:4\tunknown\ttrue\n"
	recs, err := parse(strings.NewReader(input))
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, "a1.metal", recs[0].typ, "sorted by instance type")
	assert.Equal(t, 4, recs[0].line)

	src, err := render("x.tsv", recs)
	require.NoError(t, err)
	s := string(src)
	assert.True(t, strings.HasPrefix(s, header+"\n// Source: x.tsv (2 instance types)."))
	assert.Contains(t, s, "\npackage vpc\n")
	assert.Contains(t, s, `{"a1.metal", Limits{ENIs: 8, IPv4PerENI: 30, DefaultNetworkCard: 0, NetworkCards: []NetworkCard{{Index: 0, MaxENIs: 8}, {Index: 1, MaxENIs: 4}}, Hypervisor: "unknown", BareMetal: true}},`)
	assert.Contains(t, s, `{"z1.large", Limits{ENIs: 2, IPv4PerENI: 4, DefaultNetworkCard: 0, NetworkCards: []NetworkCard{{Index: 0, MaxENIs: 2}}, Hypervisor: "xen", BareMetal: false}},`)
	assert.Less(t, strings.Index(s, `"a1.metal"`), strings.Index(s, `"z1.large"`))
}
