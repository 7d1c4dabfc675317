package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseSmapsRollup(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Memory
		err  bool
	}{
		{name: "kernel 6 rollup", in: "55d0-7ffd ---p 00000000 00:00 0    [rollup]\nRss:               61372 kB\nPss:               60000 kB\nPss_Anon:          30000 kB\nAnonymous:         30120 kB\nLazyFree:              0 kB\n",
			want: Memory{RSS: 61372, Anon: 30120, File: 31252}},
		{name: "anonymous only", in: "Rss: 100 kB\nAnonymous: 100 kB\n", want: Memory{RSS: 100, Anon: 100}},
		{name: "no Anonymous line", in: "Rss: 100 kB\nPss: 90 kB\n", err: true},
		{name: "not a number", in: "Rss: many kB\nAnonymous: 1 kB\n", err: true},
		{name: "empty", in: "", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSmapsRollup(tc.in)
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
