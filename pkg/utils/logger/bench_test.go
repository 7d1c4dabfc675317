package logger

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

// BenchmarkLine compares one ADD-sized log line through the upstream-shape
// handler with the standard library's JSON handler, in the same run (read
// the ratio, not the absolute times).
func BenchmarkLine(b *testing.B) {
	for _, bc := range []struct {
		name string
		h    slog.Handler
	}{
		{"upstream-shape", NewHandler(io.Discard, slog.LevelDebug)},
		{"slog-json", slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug, AddSource: true})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := slog.New(bc.h).With("cmd", "ADD")
			b.ReportAllocs()
			for b.Loop() {
				l.Info("assigned address", "ip", "10.0.1.17", "eni", "eni-0123456789abcdef0",
					"pod", "default/web-7d9f", "containerID", "3f1c2a9e8b7d", "took", 125*time.Microsecond)
			}
		})
	}
}
