package failover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestPostgresCrash shows why Crash must kill every process of the
// primary, not only the postmaster. With the standby's link stalled, a
// write waits for its acknowledgement while another session runs a
// query; then the primary "crashes". SIGKILL to the postmaster's
// process group (the control; what Crash did before) kills the
// postmaster alone, since each child of it calls setsid(), and leaves
// its backends running: the waiting one ends its wait
// on the postmaster's death and finishes its commit locally, and the
// running session, reading after, answers with that change, which its
// writer was never told of and the standby never received: a failover
// loses what a client was answered from. Crash leaves no survivor: the
// running session fails, and nothing answers from the lost write.
//
// "process group, read waits" is the control's partial crash with a
// reader that writes to the WAL in its own transaction after it reads
// (pgledger's waitSQL): its commit waits for the standby, which never
// acknowledges; the postmaster's death ends that wait without an answer,
// so the session fails and nothing answers from the lost write.
func TestPostgresCrash(t *testing.T) {
	for _, tc := range []struct {
		name     string
		crash    func(*Postgres) (cleanup func())
		survives bool
		wait     bool // the reader waits for the standby (pgledger's waitSQL)
	}{
		{"process group (control)", killProcessGroup, true, false},
		{"Crash", func(p *Postgres) func() { p.Crash(); return func() {} }, false, false},
		{"process group, read waits", killProcessGroup, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := StartPostgres(t, true)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			primary := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.primary.port)
			admin, err := pgx.Connect(ctx, primary)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close(context.Background())
			for _, sql := range []string{
				`CREATE TABLE approval (id int PRIMARY KEY, state text NOT NULL)`,
				`INSERT INTO approval VALUES (1, 'pending')`,
				// Busy until then (it never waits, so it never looks at
				// the postmaster), then reads the row anew.
				`CREATE FUNCTION busy_read(until timestamptz, wait bool) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE s text;
BEGIN
	WHILE clock_timestamp() < until LOOP END LOOP;
	s := (SELECT state FROM approval WHERE id = 1);
	IF wait THEN PERFORM pg_logical_emit_message(true, 'mcp-confirm', ''); END IF;
	RETURN s;
END $$`,
			} {
				if _, err := admin.Exec(ctx, sql); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			writer, err := pgx.Connect(ctx, primary)
			if err != nil {
				t.Fatal(err)
			}
			defer writer.Close(context.Background())
			reader, err := pgx.Connect(ctx, primary)
			if err != nil {
				t.Fatal(err)
			}
			defer reader.Close(context.Background())

			p.Relay.Stall()
			written := make(chan error, 1)
			go func() {
				_, err := writer.Exec(ctx, `UPDATE approval SET state = 'spent' WHERE id = 1`)
				written <- err
			}()
			waitActivity(ctx, t, admin, `wait_event = 'SyncRep'`)
			type answer struct {
				state string
				err   error
			}
			read := make(chan answer, 1)
			go func() {
				var a answer
				// The simple protocol: one message, so a session seen
				// active on it is running it. With the extended
				// protocol's prepare round trip first, the session is
				// seen active while it parses, then waits for the
				// client, and the postmaster's death ends that wait:
				// the flake this stops.
				a.err = reader.QueryRow(ctx, `SELECT busy_read(clock_timestamp() + interval '3 seconds', $1)`,
					pgx.QueryExecModeSimpleProtocol, tc.wait).Scan(&a.state)
				read <- a
			}()
			waitActivity(ctx, t, admin, `state = 'active' AND query LIKE 'SELECT busy_read%'`)

			cleanup := tc.crash(p)
			defer cleanup()
			werr := <-written
			a := <-read
			t.Logf("writer: %v; reader: %q, %v", werr, a.state, a.err)
			if werr == nil {
				t.Fatal("the writer was told its commit succeeded, with the standby's link stalled")
			}
			var onStandby string
			if err := p.query(ctx, p.standby, `SELECT state FROM approval WHERE id = 1`, nil, &onStandby); err != nil {
				t.Fatal(err)
			}
			if onStandby != "pending" {
				t.Fatalf("the standby holds %q: the stalled write reached it", onStandby)
			}
			if idle(a.err) {
				t.Fatalf("inconclusive: the reading session was waiting for its client, not running busy_read, when the postmaster died: %v", a.err)
			}
			switch {
			case tc.survives && (a.err != nil || a.state != "spent"):
				t.Fatalf("control: the surviving session answered %q, %v; want the stalled write, %q", a.state, a.err, "spent")
			case !tc.survives && a.err == nil:
				t.Fatalf("a session of the crashed primary answered %q (the standby holds %q)", a.state, onStandby)
			}
		})
	}
}

// idle reports whether err is the error a session gets when the
// postmaster dies while it waits for its client (secure_read's
// WL_POSTMASTER_DEATH): the session was not running its query.
func idle(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57P01" /* admin_shutdown */ && strings.Contains(pe.Message, "unexpected postmaster exit")
}

// killProcessGroup sends SIGKILL to the primary postmaster's process
// group, which holds none of its children, and severs the relay; the
// cleanup it returns kills the children.
func killProcessGroup(p *Postgres) func() {
	pm := p.primary.cmd.Process.Pid
	if err := syscall.Kill(pm, syscall.SIGSTOP); err != nil {
		p.t.Fatal(err)
	}
	kids, err := freezeChildren(pm) // only to know them
	for _, pid := range kids {
		syscall.Kill(pid, syscall.SIGCONT)
	}
	if err != nil {
		p.t.Fatal(err)
	}
	syscall.Kill(-pm, syscall.SIGKILL)
	p.primary.cmd.Wait()
	p.primary.cmd = nil
	p.Relay.Sever()
	return func() {
		for _, pid := range kids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitActivity waits until one session of the server admin is
// connected to matches where (a condition on pg_stat_activity).
func waitActivity(ctx context.Context, t *testing.T, admin *pgx.Conn, where string) {
	t.Helper()
	for {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE `+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no session with %s: %v", where, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
