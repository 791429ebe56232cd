package pgledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger/pgledger"
)

// The check reads the settings the store's own connections run with: the
// test server's defaults pass, and synchronous_commit = off, set for these
// connections only (never on the shared server), is refused.
func TestCheckDurability(t *testing.T) {
	for _, tt := range []struct {
		name   string
		params map[string]string
		want   string
	}{
		{"defaults", nil, ""},
		{"synchronous_commit local", map[string]string{"synchronous_commit": "local"}, ""},
		{"synchronous_commit off", map[string]string{"synchronous_commit": "off"}, "synchronous_commit = off"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := pgxpool.ParseConfig(serverURL(t))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.params {
				cfg.ConnConfig.RuntimeParams[k] = v
			}
			p, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			s, err := pgledger.New(p, pgledger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = s.CheckDurability(context.Background())
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, pgledger.ErrNotDurable) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrNotDurable mentioning %q", err, tt.want)
			}
		})
	}
}
