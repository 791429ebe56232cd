package storeurl_test

import (
	"errors"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger/storeurl"
)

func TestKind(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"", "memory"},
		{"memory:", "memory"},
		{"redis://127.0.0.1:6379/0", "redis"},
		{"rediss://h/1", "redis"},
		{"unix:///run/redis.sock", "redis"},
		{"redis-sentinel://h1:26379,h2:26379/mymaster?replicas=1", "redis"},
		{"postgres://u@h/db", "postgres"},
		{"POSTGRESQL://u@h/db", "postgres"},
		{"mysql://u:pw@h/db", ""},
	} {
		got, err := storeurl.Kind(tt.url)
		if got != tt.want || (tt.want == "") != errors.Is(err, storeurl.ErrUnsupported) {
			t.Errorf("Kind(%q) = %q, %v; want %q", tt.url, got, err, tt.want)
		}
	}
}
