package loglimit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// line is what a test checks of one written line.
type line struct {
	Level      string `json:"level"`
	Msg        string `json:"msg"`
	Key        string `json:"key"`
	Message    string `json:"message"`
	Suppressed int    `json:"suppressed"`
	N          int    `json:"n"`
}

func readLines(t *testing.T, buf *bytes.Buffer) []line {
	t.Helper()
	var out []line
	sc := bufio.NewScanner(buf)
	for sc.Scan() {
		var l line
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		out = append(out, l)
	}
	buf.Reset()
	return out
}

// step logs count lines under key (numbered from 1 in field n), or, when
// count is 0, advances the clock by wait.
type step struct {
	key   string
	count int
	level slog.Level
	wait  time.Duration
}

func written(key string, from, to int) []line {
	var out []line
	for n := from; n <= to; n++ {
		out = append(out, line{Level: "WARN", Msg: "bad request " + key, N: n})
	}
	return out
}

func summary(key string, n int) line {
	return line{Level: "WARN", Msg: SummaryMsg, Key: key, Message: "bad request " + key, Suppressed: n}
}

func TestLoggerLetsABurstThroughPerKeyAndSummarisesTheRest(t *testing.T) {
	cfg := Config{Burst: 3, Interval: time.Minute, MaxKeys: 2}
	tests := []struct {
		name  string
		steps []step
		want  []line
	}{
		{name: "under the burst every line is written",
			steps: []step{{key: "a", count: 3}, {wait: time.Hour}},
			want:  written("a", 1, 3)},
		{name: "over the burst: the rest counted, one summary when the interval ends",
			steps: []step{{key: "a", count: 1000}, {wait: 59 * time.Second}, {key: "a", count: 1}, {wait: time.Second}},
			want:  append(written("a", 1, 3), summary("a", 998))},
		{name: "a new interval has a new burst",
			steps: []step{{key: "a", count: 5}, {wait: time.Minute}, {key: "a", count: 4}, {wait: time.Minute}},
			want:  append(append(append(written("a", 1, 3), summary("a", 2)), written("a", 1, 3)...), summary("a", 1))},
		{name: "keys are limited separately",
			steps: []step{{key: "a", count: 4}, {key: "b", count: 5}, {wait: time.Minute}},
			want:  append(append(append(written("a", 1, 3), written("b", 1, 3)...), summary("a", 1)), summary("b", 2))},
		{name: "past MaxKeys new keys share the overflow key",
			steps: []step{{key: "a", count: 1}, {key: "b", count: 1}, {key: "c", count: 2}, {key: "d", count: 2}, {wait: time.Minute}},
			want: []line{{Level: "WARN", Msg: "bad request a", N: 1}, {Level: "WARN", Msg: "bad request b", N: 1},
				{Level: "WARN", Msg: "bad request c", N: 1}, {Level: "WARN", Msg: "bad request c", N: 2},
				{Level: "WARN", Msg: "bad request d", N: 1},
				{Level: "WARN", Msg: SummaryMsg, Key: OverflowKey, Message: "bad request d", Suppressed: 1}}},
		{name: "keys whose interval ended make room",
			steps: []step{{key: "a", count: 1}, {key: "b", count: 1}, {wait: time.Minute}, {key: "c", count: 4}, {wait: time.Minute}},
			want:  append(append(written("a", 1, 1), written("b", 1, 1)...), append(written("c", 1, 3), summary("c", 1))...)},
		{name: "lines the level filters out are not counted",
			steps: []step{{key: "a", count: 10, level: slog.LevelDebug}, {key: "a", count: 3}, {wait: time.Minute}},
			want:  written("a", 1, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			clock := newClock()
			c := cfg
			c.Clock = clock
			log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
			l := New(log, c)
			for _, s := range tt.steps {
				if s.count == 0 {
					clock.Advance(s.wait)
					continue
				}
				for n := 1; n <= s.count; n++ {
					if s.level == slog.LevelDebug {
						l.Debug(s.key, "bad request "+s.key, "n", n)
					} else {
						l.Warn(s.key, "bad request "+s.key, "n", n)
					}
				}
			}
			assert.Equal(t, tt.want, readLines(t, &buf))
		})
	}
}

// The summary carries the highest level suppressed and the call site of
// the first suppressed line; written lines carry their own call site.
func TestSummaryLevelAndCallSite(t *testing.T) {
	var buf bytes.Buffer
	clock := newClock()
	l := New(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{AddSource: true})), Config{Burst: 1, Clock: clock})
	l.Info("k", "m")
	l.Info("k", "m") // the first suppressed line
	l.Error("k", "m")
	l.Warn("k", "m")
	clock.Advance(DefaultInterval)
	type sourced struct {
		Level  string
		Msg    string `json:"msg"`
		Source struct{ Line int }
	}
	var got []sourced
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var g sourced
		require.NoError(t, json.Unmarshal(sc.Bytes(), &g))
		got = append(got, g)
	}
	require.Len(t, got, 2)
	assert.Equal(t, "INFO", got[0].Level)
	assert.Equal(t, "ERROR", got[1].Level)
	assert.Equal(t, SummaryMsg, got[1].Msg)
	assert.Equal(t, got[0].Source.Line+1, got[1].Source.Line, "summary points at the first suppressed call")
}

// Many goroutines flooding one key: exactly Burst lines per interval and
// a summary accounting for every other line.
func TestConcurrentFloodIsAccountedFor(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	clock := newClock()
	l := New(slog.New(slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &buf}, nil)), Config{Burst: 5, Clock: clock})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				l.Warn("k", "bad request k", "n", g*1000+i)
			}
		})
	}
	wg.Wait()
	clock.Advance(DefaultInterval)
	lines := readLines(t, &buf)
	require.Len(t, lines, 6, fmt.Sprint(lines))
	assert.Equal(t, summary("k", 7995), lines[5])
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// newClock is the shared manual clock, set to the instant the expected
// lines of these tests were written for.
func newClock() *clocktest.Clock {
	c := clocktest.New()
	c.Set(time.Date(2026, 1, 10, 1, 0, 0, 0, time.UTC))
	return c
}
