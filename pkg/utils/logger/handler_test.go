package logger

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/slogtest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// at is the instant of upstream's sample line
// {"level":"debug","ts":"2026-01-10T01:28:11.140Z","caller":"datastore/data_store.go:618","msg":"..."}.
var at = time.Date(2026, 1, 10, 1, 28, 11, 140_999_000, time.UTC)

// here returns a program counter of its caller and the caller text the
// handler must write for it.
func here() (uintptr, string) {
	var pcs [1]uintptr
	runtime.Callers(2, pcs[:])
	_, file, line, _ := runtime.Caller(1)
	return pcs[0], "logger/" + file[strings.LastIndexByte(file, '/')+1:] + ":" + fmt.Sprint(line)
}

type point struct{ X, Y int }

func TestHandlerWritesUpstreamsLineShape(t *testing.T) {
	pc, callerText := here()
	prefix := func(level string) string {
		return `{"level":"` + level + `","ts":"2026-01-10T01:28:11.140Z","caller":"` + callerText + `","msg":"m"`
	}
	cest := time.FixedZone("CEST", 2*3600)
	tests := []struct {
		name  string
		level slog.Level
		with  func(slog.Handler) slog.Handler
		attrs []slog.Attr
		want  string // after prefix(level)
	}{
		{name: "no fields", level: slog.LevelInfo, want: `}`},
		{name: "debug", level: slog.LevelDebug, want: `}`},
		{name: "below debug is debug", level: slog.LevelDebug - 4, want: `}`},
		{name: "warn", level: slog.LevelWarn, want: `}`},
		{name: "error", level: slog.LevelError, want: `}`},
		{name: "above error is error", level: slog.LevelError + 4, want: `}`},
		{name: "fields follow msg in order", level: slog.LevelInfo,
			attrs: []slog.Attr{slog.String("ip", "10.0.0.1"), slog.Int("n", -3), slog.Uint64("u", 7), slog.Bool("ok", true)},
			want:  `,"ip":"10.0.0.1","n":-3,"u":7,"ok":true}`},
		{name: "With fields come first", level: slog.LevelInfo,
			with:  func(h slog.Handler) slog.Handler { return h.WithAttrs([]slog.Attr{slog.String("cmd", "ADD")}) },
			attrs: []slog.Attr{slog.String("pod", "default/web")},
			want:  `,"cmd":"ADD","pod":"default/web"}`},
		{name: "durations in seconds, times in the line's layout", level: slog.LevelInfo,
			attrs: []slog.Attr{slog.Duration("took", 1500*time.Millisecond), slog.Time("at", at.In(cest)), slog.Any("d", 2*time.Second)},
			want:  `,"took":1.5,"at":"2026-01-10T03:28:11.140+0200","d":2}`},
		{name: "errors as text, nil as null", level: slog.LevelError,
			attrs: []slog.Attr{slog.Any("error", errors.New("no addresses")), slog.Any("none", nil)},
			want:  `,"error":"no addresses","none":null}`},
		{name: "floats as zap writes them", level: slog.LevelInfo,
			attrs: []slog.Attr{slog.Float64("f", 0.25), slog.Float64("nan", math.NaN()), slog.Float64("inf", math.Inf(1)), slog.Float64("ninf", math.Inf(-1))},
			want:  `,"f":0.25,"nan":"NaN","inf":"+Inf","ninf":"-Inf"}`},
		{name: "other values as JSON, no HTML escaping", level: slog.LevelInfo,
			attrs: []slog.Attr{slog.Any("p", point{1, 2}), slog.Any("s", []string{"<a>&"})},
			want:  `,"p":{"X":1,"Y":2},"s":["<a>&"]}`},
		{name: "strings escaped as JSON needs", level: slog.LevelInfo,
			attrs: []slog.Attr{slog.String("s", "a\"b\\c\n\r\t\x01<é>\xff")},
			want:  `,"s":"a\"b\\c\n\r\t\u0001<é>\ufffd"}`},
		{name: "groups nest", level: slog.LevelInfo,
			with: func(h slog.Handler) slog.Handler {
				return h.WithAttrs([]slog.Attr{slog.Int("a", 1)}).WithGroup("g").WithAttrs([]slog.Attr{slog.Int("b", 2)}).WithGroup("h")
			},
			attrs: []slog.Attr{slog.Int("c", 3), slog.Group("k", slog.Int("d", 4)), slog.Group("", slog.Int("e", 5))},
			want:  `,"a":1,"g":{"b":2,"h":{"c":3,"k":{"d":4},"e":5}}}`},
		{name: "empty groups and empty attrs dropped", level: slog.LevelInfo,
			with:  func(h slog.Handler) slog.Handler { return h.WithGroup("g").WithAttrs(nil) },
			attrs: []slog.Attr{{}, slog.Group("k")},
			want:  `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			var h slog.Handler = NewHandler(&buf, slog.LevelDebug-8)
			if tt.with != nil {
				h = tt.with(h)
			}
			r := slog.NewRecord(at, tt.level, "m", pc)
			r.AddAttrs(tt.attrs...)
			require.NoError(t, h.Handle(context.Background(), r))
			level := levelName(tt.level)
			assert.Equal(t, prefix(level)+tt.want+"\n", buf.String())
			assert.True(t, json.Valid(buf.Bytes()), "valid JSON: %s", buf.String())
		})
	}
}

// A record without time or caller leaves those keys out, as zap does.
func TestHandlerOmitsZeroTimeAndUnknownCaller(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, NewHandler(&buf, slog.LevelInfo).Handle(context.Background(), slog.NewRecord(time.Time{}, slog.LevelInfo, "m", 0)))
	assert.Equal(t, `{"level":"info","msg":"m"}`+"\n", buf.String())
}

// Through a slog.Logger the caller is the line that logged, and the level
// of New filters.
func TestLoggerNamesTheCallingLineAndFilters(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelInfo).With("component", "ipamd")
	log.Debug("hidden")
	_, _, n, _ := runtime.Caller(0)
	log.Warn("pool low", "free", 0) // the line after runtime.Caller
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	assert.Equal(t, fmt.Sprintf("logger/handler_test.go:%d", n+1), line["caller"])
	assert.Equal(t, "warn", line["level"])
	assert.Equal(t, "pool low", line["msg"])
	assert.Equal(t, "ipamd", line["component"])
	assert.EqualValues(t, 0, line["free"])
	ts, err := time.Parse(timeLayout, line["ts"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), ts, time.Minute)
	assert.Equal(t, 1, strings.Count(buf.String(), "\n"), "the debug line is filtered")
	assert.Equal(t, []string{"level", "ts", "caller", "msg", "component", "free"}, keyOrder(t, buf.Bytes()))
}

// The handler keeps every rule slog sets for handlers (testing/slogtest).
func TestHandlerPassesSlogtest(t *testing.T) {
	var buf bytes.Buffer
	slogtest.Run(t, func(*testing.T) slog.Handler {
		buf.Reset()
		return NewHandler(&buf, slog.LevelInfo)
	}, func(t *testing.T) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal(buf.Bytes(), &m), buf.String())
		if ts, ok := m[timeKey]; ok { // slogtest looks for slog's own key
			delete(m, timeKey)
			m[slog.TimeKey] = ts
		}
		return m
	})
}

// Concurrent loggers sharing one writer never interleave inside a line.
func TestHandlerWritesWholeLines(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelInfo)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			l := log.With("g", g)
			for i := range 200 {
				l.Info("line", "i", i, "pad", strings.Repeat("x", 100))
			}
		})
	}
	wg.Wait()
	sc := bufio.NewScanner(&buf)
	lines := 0
	for sc.Scan() {
		require.True(t, json.Valid(sc.Bytes()), sc.Text())
		lines++
	}
	assert.Equal(t, 1600, lines)
}

// keyOrder returns the top-level keys of a JSON object in their order.
func keyOrder(t *testing.T, line []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, k.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}
