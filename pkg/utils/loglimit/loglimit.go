// Package loglimit keeps log lines that outside input can repeat at will
// (malformed requests, bad files, HTTP requests) from flooding the log.
// Per key, the first Burst lines of each Interval are written; the rest
// are counted, and when the interval ends one summary line says how many
// were left out, at their level and with their call site. A quiet key
// costs nothing and writes every line.
//
// Keys must come from a small fixed set chosen by the code (an RPC name
// and a reason label), never from the input itself; past MaxKeys distinct
// keys, new ones share one overflow key so the limiter's memory stays
// bounded whatever a client sends.
//
// Like every pkg/utils package, it never imports a package of this module
// outside pkg/utils.
package loglimit

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultBurst    = 10
	DefaultInterval = time.Minute
	DefaultMaxKeys  = 64
)

// OverflowKey is the key lines share once MaxKeys keys are in use.
const OverflowKey = "(other)"

// SummaryMsg is the msg of the line reporting suppressed lines; its fields
// are "key", "message" (the suppressed lines' msg), "suppressed" (how
// many) and "interval".
const SummaryMsg = "repeated log lines suppressed"

// Clock is the time the limiter runs on.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func())
}

type realClock struct{}

func (realClock) Now() time.Time                      { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) { time.AfterFunc(d, f) }

// Config sets how much a key may log. Zero fields take the defaults.
type Config struct {
	Burst    int           // lines written per key per interval
	Interval time.Duration // the window the burst applies to
	MaxKeys  int           // distinct keys tracked
	Clock    Clock         // the real clock when nil
}

func (c Config) withDefaults() Config {
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.MaxKeys <= 0 {
		c.MaxKeys = DefaultMaxKeys
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	return c
}

// Logger writes through a slog.Logger, a burst of lines per key at a time.
type Logger struct {
	log  *slog.Logger
	cfg  Config
	mu   sync.Mutex
	keys map[string]*window
}

// window is one key's current interval.
type window struct {
	key        string
	end        time.Time
	written    int
	suppressed int
	// Of the suppressed lines: the highest level, the first msg and call site.
	level slog.Level
	msg   string
	pc    uintptr
}

// New returns a Logger writing to log.
func New(log *slog.Logger, cfg Config) *Logger {
	return &Logger{log: log, cfg: cfg.withDefaults(), keys: map[string]*window{}}
}

// Debug logs at debug level under key.
func (l *Logger) Debug(key, msg string, args ...any) {
	l.emit(context.Background(), slog.LevelDebug, key, msg, args)
}

// Info logs at info level under key.
func (l *Logger) Info(key, msg string, args ...any) {
	l.emit(context.Background(), slog.LevelInfo, key, msg, args)
}

// Warn logs at warn level under key.
func (l *Logger) Warn(key, msg string, args ...any) {
	l.emit(context.Background(), slog.LevelWarn, key, msg, args)
}

// Error logs at error level under key.
func (l *Logger) Error(key, msg string, args ...any) {
	l.emit(context.Background(), slog.LevelError, key, msg, args)
}

// emit must be called directly by the exported methods: the call site it
// records is two frames up.
func (l *Logger) emit(ctx context.Context, level slog.Level, key, msg string, args []any) {
	if !l.log.Enabled(ctx, level) {
		return // a line the level filters out is neither written nor counted
	}
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // runtime.Callers, emit, the exported method
	now := l.cfg.Clock.Now()
	if !l.admit(now, key, level, msg, pcs[0]) {
		return
	}
	r := slog.NewRecord(now, level, msg, pcs[0])
	r.Add(args...)
	_ = l.log.Handler().Handle(ctx, r)
}

// admit counts a line against its key's window and reports whether it may
// be written. The first suppressed line of a window schedules its summary.
func (l *Logger) admit(now time.Time, key string, level slog.Level, msg string, pc uintptr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.keys[key]
	if w == nil || !now.Before(w.end) {
		if w == nil && len(l.keys) >= l.cfg.MaxKeys {
			key = l.makeRoom(now, key)
		}
		if w = l.keys[key]; w == nil || !now.Before(w.end) {
			// A window that ended with lines suppressed keeps its summary
			// timer, which holds the window itself.
			w = &window{key: key, end: now.Add(l.cfg.Interval)}
			l.keys[key] = w
		}
	}
	if w.written < l.cfg.Burst {
		w.written++
		return true
	}
	w.suppressed++
	if w.suppressed == 1 {
		w.level, w.msg, w.pc = level, msg, pc
		l.cfg.Clock.AfterFunc(w.end.Sub(now), func() { l.summarise(w) })
	} else if level > w.level {
		w.level = level
	}
	return false
}

// makeRoom drops windows that ended without suppressing anything and
// returns key, or OverflowKey when every tracked key is still in use.
// Called with l.mu held.
func (l *Logger) makeRoom(now time.Time, key string) string {
	for k, w := range l.keys {
		if !now.Before(w.end) && w.suppressed == 0 {
			delete(l.keys, k)
		}
	}
	if len(l.keys) >= l.cfg.MaxKeys {
		return OverflowKey
	}
	return key
}

// summarise writes the summary of a window whose interval ended.
func (l *Logger) summarise(w *window) {
	l.mu.Lock()
	n := w.suppressed
	w.suppressed = 0
	if l.keys[w.key] == w {
		delete(l.keys, w.key)
	}
	l.mu.Unlock()
	if n == 0 {
		return
	}
	r := slog.NewRecord(l.cfg.Clock.Now(), w.level, SummaryMsg, w.pc)
	r.AddAttrs(slog.String("key", w.key), slog.String("message", w.msg), slog.Int("suppressed", n),
		slog.String("interval", l.cfg.Interval.String()))
	_ = l.log.Handler().Handle(context.Background(), r)
}
