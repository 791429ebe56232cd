package pgledger

import (
	"strings"
	"testing"
)

// The decision on settings no test may set on the shared server (fsync,
// full_page_writes, standbys), as a table; TestCheckDurability reads real
// ones.
func TestDurabilityRisks(t *testing.T) {
	safe := pgConfig{fsync: "on", fullPageWrites: "on", synchronousCommit: "on"}
	with := func(f func(*pgConfig)) pgConfig { c := safe; f(&c); return c }
	tests := []struct {
		name string
		c    pgConfig
		want []string // one substring per risk; none for a safe configuration
	}{
		{"defaults", safe, nil},
		{"local, no standby", with(func(c *pgConfig) { c.synchronousCommit = "local" }), nil},
		{"remote_write, no standby", with(func(c *pgConfig) { c.synchronousCommit = "remote_write" }), nil},
		{"fsync off", with(func(c *pgConfig) { c.fsync = "off" }), []string{"fsync = off"}},
		{"full_page_writes off", with(func(c *pgConfig) { c.fullPageWrites = "off" }), []string{"full_page_writes = off"}},
		{"synchronous_commit off", with(func(c *pgConfig) { c.synchronousCommit = "off" }), []string{"synchronous_commit = off"}},
		{"sync standby", with(func(c *pgConfig) { c.standbys = []standby{{"s1", "sync"}} }), nil},
		{"sync standby, remote_apply", with(func(c *pgConfig) { c.synchronousCommit = "remote_apply"; c.standbys = []standby{{"s1", "sync"}} }), nil},
		{"async standby", with(func(c *pgConfig) { c.standbys = []standby{{"s1", "async"}} }), []string{`standby "s1" is async`}},
		{"potential standby", with(func(c *pgConfig) { c.standbys = []standby{{"s1", "sync"}, {"s2", "potential"}} }), []string{`standby "s2" is potential`}},
		{"quorum standby", with(func(c *pgConfig) { c.standbys = []standby{{"s1", "quorum"}} }), []string{`standby "s1" is quorum`}},
		{"unreadable standby", with(func(c *pgConfig) { c.standbys = []standby{{"s1", ""}} }), []string{"pg_read_all_stats"}},
		{"sync standby, local commit", with(func(c *pgConfig) { c.synchronousCommit = "local"; c.standbys = []standby{{"s1", "sync"}} }), []string{"synchronous_commit = local with 1 standby"}},
		{"sync standby, remote_write", with(func(c *pgConfig) { c.synchronousCommit = "remote_write"; c.standbys = []standby{{"s1", "sync"}} }), []string{"synchronous_commit = remote_write"}},
		{"everything", pgConfig{fsync: "off", fullPageWrites: "off", synchronousCommit: "off", standbys: []standby{{"a", "async"}}},
			[]string{"fsync", "full_page_writes", "synchronous_commit = off", "synchronous_commit = off with 1 standby", `standby "a" is async`}},
	}
	for _, tt := range tests {
		got := tt.c.risks()
		if len(got) != len(tt.want) {
			t.Errorf("%s: risks %q, want %d", tt.name, got, len(tt.want))
			continue
		}
		for i := range got {
			if !strings.Contains(got[i], tt.want[i]) {
				t.Errorf("%s: risk %q does not mention %q", tt.name, got[i], tt.want[i])
			}
		}
	}
}
