package logger

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Upstream's line shape (zap's JSON encoder with the production key names
// and ISO 8601 time), which log queries and parsers written for aws-node
// expect:
//
//	{"level":"info","ts":"2026-01-10T01:28:11.140Z","caller":"ipamd/ipamd.go:380","msg":"...", <fields>}
//
// The keys come in this order; fields follow msg in the order they were
// given, those of Logger.With first; a slog group is a nested object.
const (
	levelKey  = "level"
	timeKey   = "ts"
	callerKey = "caller"
	msgKey    = "msg"

	// timeLayout is zap's ISO 8601 encoder: milliseconds, numeric zone
	// without a colon ("Z" in UTC, which containers run in).
	timeLayout = "2006-01-02T15:04:05.000Z0700"
)

// Handler is a slog.Handler writing upstream's JSON line shape. Each
// record is one Write of one line, so lines from concurrent goroutines
// never interleave and a rotating file never splits one.
type Handler struct {
	out   *output
	level slog.Leveler
	// pre holds the encoded fields of With, already inside the groups
	// opened before them; opened counts those groups (closed at the end of
	// every line).
	pre    []byte
	opened int
	// pending are groups named by WithGroup with no field yet: slog drops
	// a group that ends up empty, so they are opened only once a field
	// arrives.
	pending []string
}

type output struct {
	mu sync.Mutex
	w  io.Writer
}

// NewHandler returns a Handler writing records at or above level to w.
func NewHandler(w io.Writer, level slog.Leveler) *Handler {
	if level == nil {
		level = slog.LevelInfo
	}
	return &Handler{out: &output{w: w}, level: level}
}

// Enabled reports whether records at l are written.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

// WithAttrs returns a handler that adds attrs to every line.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if !anyVisible(attrs) {
		return h
	}
	c := h.clone()
	c.pre = c.openPending(c.pre)
	for _, a := range attrs {
		c.pre = appendAttr(c.pre, a)
	}
	return c
}

// WithGroup returns a handler that nests later fields under name.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := h.clone()
	c.pending = append(c.pending, name)
	return c
}

// Handle writes one line.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	buf := make([]byte, 0, 256+len(h.pre))
	buf = append(buf, '{')
	buf = appendKey(buf, levelKey)
	buf = appendString(buf, levelName(r.Level))
	if !r.Time.IsZero() {
		buf = appendKey(buf, timeKey)
		buf = appendString(buf, r.Time.Format(timeLayout))
	}
	if c := caller(r.PC); c != "" {
		buf = appendKey(buf, callerKey)
		buf = appendString(buf, c)
	}
	buf = appendKey(buf, msgKey)
	buf = appendString(buf, r.Message)
	buf = append(buf, h.pre...)
	opened := h.opened
	if r.NumAttrs() > 0 {
		var attrs []slog.Attr
		r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
		if anyVisible(attrs) {
			buf = openGroups(buf, h.pending)
			opened += len(h.pending)
			for _, a := range attrs {
				buf = appendAttr(buf, a)
			}
		}
	}
	for range opened {
		buf = append(buf, '}')
	}
	buf = append(buf, '}', '\n')

	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	_, err := h.out.w.Write(buf)
	return err
}

func (h *Handler) clone() *Handler {
	c := *h
	c.pre = append([]byte(nil), h.pre...)
	c.pending = append([]string(nil), h.pending...)
	return &c
}

// openPending moves the pending groups into buf, opened.
func (h *Handler) openPending(buf []byte) []byte {
	buf = openGroups(buf, h.pending)
	h.opened += len(h.pending)
	h.pending = nil
	return buf
}

func openGroups(buf []byte, names []string) []byte {
	for _, g := range names {
		buf = appendKey(buf, g)
		buf = append(buf, '{')
	}
	return buf
}

// levelName is zap's lowercase level text. slog has nothing above Error
// (upstream's ipamd logs no fatal line either: it exits with an error).
func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}

// caller is zap's short caller: the file's directory and name, and line
// ("rpcserver/cni.go:42").
func caller(pc uintptr) string {
	if pc == 0 {
		return ""
	}
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	if f.File == "" {
		return ""
	}
	file := f.File
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		if j := strings.LastIndexByte(file[:i], '/'); j >= 0 {
			file = file[j+1:]
		}
	}
	return file + ":" + itoa(f.Line)
}

func itoa(n int) string {
	var b [20]byte
	return string(appendInt(b[:0], int64(n)))
}

// durationSeconds is how zap's production encoder writes a duration.
func durationSeconds(d time.Duration) float64 { return float64(d) / float64(time.Second) }
