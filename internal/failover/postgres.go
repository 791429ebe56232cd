package failover

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is a PostgreSQL primary and a standby that streams from it
// through a [Relay], each a postgres process of the test's own on a
// loopback port, in a temporary directory.
type Postgres struct {
	t                testing.TB
	bin              string // PostgreSQL's bin directory
	cred             *syscall.Credential
	Relay            *Relay
	primary, standby *postgres
}

// A postgres is one running server.
type postgres struct {
	dir  string
	port int
	cmd  *exec.Cmd
}

// StandbyName is the standby's application_name: what the primary's
// synchronous_standby_names names.
const StandbyName = "standby1"

// StartPostgres initializes a primary (initdb), copies it to a standby
// (pg_basebackup) and starts both, the standby streaming from the primary
// through a relay. With synchronous, the primary's commits wait for the
// standby to flush them (synchronous_standby_names, synchronous_commit
// on); without, replication is asynchronous. It returns once the standby
// streams. Run as root, the servers run as the postgres user (initdb and
// postgres refuse root). It skips the test, naming what to install, when
// PostgreSQL's programs are not found.
func StartPostgres(t testing.TB, synchronous bool) *Postgres {
	t.Helper()
	p := &Postgres{t: t, bin: binDir(t), cred: credential(t)}
	root, err := os.MkdirTemp("", "mcp-confirm-failover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if p.cred != nil {
		if err := os.Chown(root, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	p.primary = &postgres{dir: filepath.Join(root, "primary"), port: freePort(t)}
	p.run("initdb", "-D", p.primary.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	sync := ""
	if synchronous {
		sync = StandbyName
	}
	p.start(p.primary, "-c", "synchronous_standby_names="+sync)
	p.Relay = NewRelay(t, fmt.Sprintf("127.0.0.1:%d", p.primary.port))

	p.standby = &postgres{dir: filepath.Join(root, "standby"), port: freePort(t)}
	p.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.primary.port), "-U", "postgres",
		"-D", p.standby.dir, "-X", "stream", "--checkpoint=fast", "--no-sync")
	signal := filepath.Join(p.standby.dir, "standby.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if p.cred != nil {
		if err := os.Chown(signal, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	// The standby runs without synchronous_standby_names: promoted, it
	// is a primary without a standby, whose commits must not wait.
	p.start(p.standby, "-c", "synchronous_standby_names=",
		"-c", fmt.Sprintf("primary_conninfo=host=127.0.0.1 port=%d user=postgres application_name=%s", p.Relay.Port(), StandbyName))
	want := "async"
	if synchronous {
		want = "sync"
	}
	poll(t, 30*time.Second, "the standby did not stream", func(ctx context.Context) bool {
		var state string
		err := p.query(ctx, p.primary, `SELECT sync_state FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'`, []any{StandbyName}, &state)
		return err == nil && state == want
	})
	return p
}

// URL is the multi-host URL of the pair, primary first, that follows a
// promotion: target_session_attrs=read-write picks whichever is the
// primary.
func (p *Postgres) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
		p.primary.port, p.standby.port)
}

// StandbyURL is the standby's URL alone (read-only until promoted).
func (p *Postgres) StandbyURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", p.standby.port)
}

// Crash kills every process of the primary at one instant (the
// postmaster and its backends, walsender and helpers, as a crash of its
// machine; see [postgres.kill]) and severs the relay: what it held never
// reaches the standby.
func (p *Postgres) Crash() {
	p.t.Helper()
	if err := p.primary.kill(); err != nil {
		p.t.Fatalf("crash the primary: %v", err)
	}
	p.Relay.Sever()
}

// Promote promotes the standby (pg_promote, as a failover tool would) and
// waits until it accepts writes.
func (p *Postgres) Promote() time.Duration {
	p.t.Helper()
	begin := time.Now()
	var ok bool
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.query(ctx, p.standby, `SELECT pg_promote(true, 60)`, nil, &ok); err != nil || !ok {
		p.t.Fatalf("pg_promote: %v %v", ok, err)
	}
	return time.Since(begin)
}

// run runs one of PostgreSQL's programs, as the servers' user.
func (p *Postgres) run(name string, args ...string) {
	p.t.Helper()
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	cmd.Dir = os.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

// start starts a server on s.dir with the settings every one of them
// shares and args, in a process group of its own, and waits until it
// accepts connections.
func (p *Postgres) start(s *postgres, args ...string) {
	p.t.Helper()
	base := []string{"-D", s.dir, "-c", "port=" + strconv.Itoa(s.port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=", "-c", "shared_buffers=16MB", "-c", "max_connections=40",
		"-c", "wal_level=replica", "-c", "max_wal_senders=4", "-c", "hot_standby=on",
		"-c", "logging_collector=off", "-c", "log_min_messages=fatal"}
	s.cmd = exec.Command(filepath.Join(p.bin, "postgres"), append(base, args...)...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred}
	s.cmd.Dir = os.TempDir()
	if err := s.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { s.kill() })
	poll(p.t, 60*time.Second, "postgres did not start in "+s.dir, func(ctx context.Context) bool {
		var one int
		return p.query(ctx, s, `SELECT 1`, nil, &one) == nil
	})
}

// kill kills every process of the server at one instant and reaps the
// postmaster.
//
// A signal to the postmaster's process group reaches the postmaster
// alone: each of its children calls setsid() as it starts
// (InitPostmasterChild), so every backend is a process group of its own.
// Survivors notice the postmaster's death only when they next wait, and
// a backend waiting for the synchronous standby's acknowledgement then
// stops waiting and finishes its commit locally: the change, which the
// standby never received, becomes visible to the sessions still running,
// which answer from it before they exit, and a failover loses it
// (TestPostgresCrash, "process group"). A crash of the machine leaves
// no such survivor. So the postmaster is stopped first (it forks no
// more), then each of its children, and only then is each killed.
func (s *postgres) kill() error {
	if s.cmd == nil {
		return nil
	}
	pm := s.cmd.Process.Pid
	defer func() {
		syscall.Kill(pm, syscall.SIGKILL)
		s.cmd.Wait()
		s.cmd = nil
	}()
	if err := syscall.Kill(pm, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stop the postmaster: %w", err)
	}
	kids, err := freezeChildren(pm)
	for _, pid := range kids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if err != nil {
		return err
	}
	syscall.Kill(pm, syscall.SIGKILL)
	// Reaped by init, not by us: wait until each is gone (or a zombie,
	// which holds no socket and runs nothing).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		alive := 0
		for _, pid := range kids {
			if st, _, ok := procStat(pid); ok && st != 'Z' {
				alive++
			}
		}
		if alive == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d process(es) of the postmaster %d still alive 10s after SIGKILL", alive, pm)
		}
	}
}

// freezeChildren stops (SIGSTOP) every child of the stopped postmaster
// pm, listing them again until no new one appears (one may have been
// forked as pm stopped), and returns them.
func freezeChildren(pm int) ([]int, error) {
	stopped := make(map[int]bool)
	var kids []int
	for {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return kids, fmt.Errorf("list the postmaster's children (this needs Linux's /proc): %w", err)
		}
		found := false
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || stopped[pid] {
				continue
			}
			if _, ppid, ok := procStat(pid); ok && ppid == pm {
				syscall.Kill(pid, syscall.SIGSTOP)
				stopped[pid], found = true, true
				kids = append(kids, pid)
			}
		}
		if !found {
			return kids, nil
		}
	}
}

// procStat reads the state and the parent of process pid from
// /proc/pid/stat; ok is false if it is gone.
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0][0], ppid, err == nil
}

// query runs sql on s and scans its one row into dst.
func (p *Postgres) query(ctx context.Context, s *postgres, sql string, args []any, dst ...any) error {
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port))
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	return c.QueryRow(ctx, sql, args...).Scan(dst...)
}

// binDir finds PostgreSQL's programs: the newest /usr/lib/postgresql/*/bin
// (Debian), or the directory of initdb on PATH.
func binDir(t testing.TB) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if path, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(path)
	}
	t.Skip("install the PostgreSQL server (Debian: apt-get install postgresql) for initdb, pg_basebackup and postgres")
	return ""
}

// credential is the user the servers run as: postgres when the test runs
// as root, else the test's own (nil).
func credential(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Getuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("running as root, and there is no postgres user to run PostgreSQL as (initdb refuses root)")
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		t.Fatalf("user postgres: uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}
