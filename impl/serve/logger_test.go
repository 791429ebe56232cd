package serve_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/impl/serve"
	"github.com/mcp-confirm/mcp-confirm/internal/mcptest"
)

// ServerLogger lowers Info to Debug and nothing else, through WithAttrs and
// WithGroup too.
func TestServerLoggerLevels(t *testing.T) {
	for _, tt := range []struct {
		name  string
		level slog.Level // of the sink
		log   slog.Level
		want  string // "" if dropped
	}{
		{"info dropped at info", slog.LevelInfo, slog.LevelInfo, ""},
		{"info shown as debug at debug", slog.LevelDebug, slog.LevelInfo, "level=DEBUG"},
		{"debug at debug", slog.LevelDebug, slog.LevelDebug, "level=DEBUG"},
		{"debug dropped at info", slog.LevelInfo, slog.LevelDebug, ""},
		{"warn kept at info", slog.LevelInfo, slog.LevelWarn, "level=WARN"},
		{"error kept at warn", slog.LevelWarn, slog.LevelError, "level=ERROR"},
		{"warn dropped at error", slog.LevelError, slog.LevelWarn, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			l := serve.ServerLogger(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: tt.level}))).
				With("k", "v").WithGroup("g")
			l.Log(context.Background(), tt.log, "message", "a", 1)
			got := b.String()
			switch {
			case tt.want == "" && got != "":
				t.Fatalf("logged %q, want nothing", got)
			case tt.want != "" && (!strings.Contains(got, tt.want) || !strings.Contains(got, "k=v g.a=1")):
				t.Fatalf("logged %q, want %s with k=v g.a=1", got, tt.want)
			}
		})
	}
}

// A 2026-07-28 request is a go-sdk server session of its own: with the
// logger at Info, go-sdk's server writes nothing for it through
// ServerLogger, where the same logger given directly (the control) writes
// a line for the session's start and end.
func TestServerLoggerQuietPerRequest(t *testing.T) {
	for _, tt := range []struct {
		name  string
		wrap  func(*slog.Logger) *slog.Logger
		quiet bool
	}{
		{"ServerLogger", serve.ServerLogger, true},
		{"control: the logger itself", func(l *slog.Logger) *slog.Logger { return l }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log mcptest.SyncBuffer
			l := slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}))
			s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{Logger: tt.wrap(l)})
			url := front(t, s, serve.HTTPOptions{})
			for range 3 {
				resp := post(t, http.DefaultClient, url, requeststate.ProtocolMRTR, "", mrtrList)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"tools"`) {
					t.Fatalf("tools/list: %s %s", resp.Status, b)
				}
			}
			got := log.String()
			if quiet := !strings.Contains(got, "server session"); quiet != tt.quiet {
				t.Fatalf("quiet = %v, want %v; the log:\n%s", quiet, tt.quiet, got)
			}
		})
	}
}
