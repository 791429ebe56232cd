package serve

import (
	"context"
	"log/slog"
)

// ServerLogger returns the logger to give go-sdk's server
// (mcp.ServerOptions.Logger) whose records go to l: go-sdk's Info records
// become Debug ones, its warnings and errors pass as they are. go-sdk logs
// each server session's start and end at Info, and over streamable HTTP
// each 2026-07-28 request is a session of its own (go-sdk's stateless
// handler), so an l at Info would write three lines for every such call:
// a system call each and a log that says nothing, at any rate of calls
// (TestServerLoggerQuietPerRequest). At Debug they are all still there.
func ServerLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return slog.New(demoted{l.Handler()})
}

// demoted passes records to h with the levels from Info up to (not
// including) Warn lowered to Debug.
type demoted struct{ h slog.Handler }

func demote(l slog.Level) slog.Level {
	if l >= slog.LevelInfo && l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func (d demoted) Enabled(ctx context.Context, l slog.Level) bool {
	return d.h.Enabled(ctx, demote(l))
}

func (d demoted) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return d.h.Handle(ctx, r)
}

func (d demoted) WithAttrs(attrs []slog.Attr) slog.Handler { return demoted{d.h.WithAttrs(attrs)} }
func (d demoted) WithGroup(name string) slog.Handler       { return demoted{d.h.WithGroup(name)} }
