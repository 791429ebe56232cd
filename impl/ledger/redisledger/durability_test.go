package redisledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger/redisledger"
	"github.com/mcp-confirm/mcp-confirm/internal/redistest"
)

func store(t *testing.T, r *redistest.Server) *redisledger.Store {
	t.Helper()
	s, err := redisledger.Open(context.Background(), r.URL(), redisledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The check passes exactly the configurations that cannot undo a Spend,
// on real servers.
func TestCheckDurability(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // "" for none
	}{
		{"no persistence", []string{"--save", "", "--appendonly", "no"}, ""},
		{"snapshots", []string{"--save", "3600 1 300 100", "--appendonly", "no"}, `save "3600 1 300 100" takes RDB snapshots and appendonly is no`},
		{"append-only file, fsync every second", []string{"--save", "", "--appendonly", "yes", "--appendfsync", "everysec"}, "appendfsync everysec"},
		{"append-only file, no fsync", []string{"--save", "", "--appendonly", "yes", "--appendfsync", "no"}, "appendfsync no"},
		{"append-only file, fsync always, and snapshots", []string{"--save", "60 1", "--appendonly", "yes", "--appendfsync", "always"}, ""},
		{"CONFIG disabled", []string{"--save", "", "--appendonly", "no", "--rename-command", "CONFIG", ""}, "cannot read its persistence settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := store(t, redistest.Start(t, tt.args...)).CheckDurability(context.Background())
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused a safe configuration: %v", err)
				}
				return
			}
			if !errors.Is(err, redisledger.ErrNotDurable) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrNotDurable mentioning %q", err, tt.want)
			}
		})
	}
	t.Run("replicas", func(t *testing.T) {
		primary := redistest.Start(t, "--save", "", "--appendonly", "no")
		replica := redistest.Start(t, "--save", "", "--appendonly", "no", "--replicaof", "127.0.0.1", fmt.Sprint(primary.Port()))
		c := primary.Client()
		defer c.Close()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if info, _ := c.Info(context.Background(), "replication").Result(); strings.Contains(info, "connected_slaves:1") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the replica did not connect")
			}
		}
		if err := store(t, primary).CheckDurability(context.Background()); !errors.Is(err, redisledger.ErrNotDurable) || !strings.Contains(err.Error(), "1 connected replica(s)") {
			t.Fatalf("primary with a replica: %v", err)
		}
		if err := store(t, replica).CheckDurability(context.Background()); !errors.Is(err, redisledger.ErrNotDurable) || !strings.Contains(err.Error(), "role:slave") {
			t.Fatalf("replica: %v", err)
		}
	})
}

// What the check is for, shown on real servers: with RDB snapshots, a
// crash after a Spend brings the spent confirmation back and it is spent a
// second time; with appendfsync always the Spend survives the crash.
func TestRestartResurrects(t *testing.T) {
	for _, tt := range []struct {
		name        string
		args        []string
		resurrected bool
	}{
		{"snapshots", []string{"--save", "3600 1", "--appendonly", "no"}, true},
		{"appendfsync always", []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := redistest.Start(t, tt.args...)
			ctx := context.Background()
			s := store(t, r)
			c := ledger.Confirmation{ID: ledger.ID{1, 2, 3}, Tool: "delete_file", ArgsDigest: "d", Subject: "s", Expires: time.Now().Add(time.Hour)}
			if err := s.Add(ctx, c); err != nil {
				t.Fatal(err)
			}
			rc := r.Client()
			if tt.resurrected {
				// The snapshot Redis would take on its own schedule.
				if err := rc.Save(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			rc.Close()
			if _, err := s.Spend(ctx, c.ID, ledger.Acting, time.Hour); err != nil {
				t.Fatalf("first Spend: %v", err)
			}
			r.Stop() // a crash: nothing saved after the Spend
			r.Restart()
			_, err := store(t, r).Spend(ctx, c.ID, ledger.Acting, time.Hour)
			if got := err == nil; got != tt.resurrected {
				t.Fatalf("second Spend after the restart: %v; spent twice: %v, want %v", err, got, tt.resurrected)
			}
			if !tt.resurrected && !errors.Is(err, ledger.ErrInProgress) {
				t.Fatalf("second Spend after the restart: %v, want ErrInProgress", err)
			}
		})
	}
}
