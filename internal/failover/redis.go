package failover

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-confirm/mcp-confirm/internal/redistest"
)

// MasterName is the name the Sentinels monitor the Redis primary under.
const MasterName = "ledger"

// Redis is a Redis primary, one replica that replicates through a
// [Relay], and three Sentinels (quorum 2) monitoring the primary, all
// redis-server processes of the test's own on loopback ports.
type Redis struct {
	t         testing.TB
	Primary   *redistest.Server
	Replica   *redistest.Server
	Relay     *Relay // between the replica and the primary
	sentinels []int  // ports
}

// StartRedis starts the set and waits until the replica is in sync and
// every Sentinel knows the replica and the other two Sentinels, so that a
// failover can be decided. It skips the test, naming the package, when
// redis-sentinel is not on PATH.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	sentinel, err := exec.LookPath("redis-sentinel")
	if err != nil {
		t.Skip("install redis-sentinel (Debian: apt-get install redis-sentinel) to run this test")
	}
	none := []string{"--save", "", "--appendonly", "no"}
	r := &Redis{t: t}
	// No delay before a full sync: the replica is in sync in
	// milliseconds, not after repl-diskless-sync-delay's 5 s.
	r.Primary = redistest.Start(t, append(none, "--repl-diskless-sync-delay", "0")...)
	r.Relay = NewRelay(t, fmt.Sprintf("127.0.0.1:%d", r.Primary.Port()))
	r.Replica = redistest.Start(t, append(none, "--replicaof", "127.0.0.1", strconv.Itoa(r.Relay.Port()))...)
	r.waitReplicated()
	dir := t.TempDir()
	for i := range 3 {
		port := freePort(t)
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i))
		// A primary silent for 300 ms is down; a failover may be retried
		// after 3 s.
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile \"\"\n"+
			"sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %[3]s 300\n"+
			"sentinel failover-timeout %[3]s 3000\n",
			port, dir, MasterName, r.Primary.Port())
		// Sentinel rewrites its configuration file: it must be writable.
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(sentinel, conf)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		r.sentinels = append(r.sentinels, port)
	}
	r.waitSentinels()
	return r
}

// URL is the redis-sentinel:// URL of the set, with query appended
// (e.g. "replicas=1&wait=1s"; "" for none).
func (r *Redis) URL(query string) string {
	addrs := make([]string, len(r.sentinels))
	for i, p := range r.sentinels {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	u := "redis-sentinel://" + strings.Join(addrs, ",") + "/" + MasterName
	if query != "" {
		u += "?" + query
	}
	return u
}

// Crash kills the primary (SIGKILL: nothing is saved on the way) and
// severs the relay: what it held never reaches the replica.
func (r *Redis) Crash() {
	r.Primary.Stop()
	r.Relay.Sever()
}

// WaitPromoted waits until every Sentinel names the replica as the
// primary, and the replica answers as one.
func (r *Redis) WaitPromoted() time.Duration {
	r.t.Helper()
	begin := time.Now()
	want := strconv.Itoa(r.Replica.Port())
	r.poll(30*time.Second, "the Sentinels did not promote the replica", func(ctx context.Context) bool {
		for _, p := range r.sentinels {
			s := redis.NewSentinelClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p)})
			addr, err := s.GetMasterAddrByName(ctx, MasterName).Result()
			s.Close()
			if err != nil || len(addr) != 2 || addr[1] != want {
				return false
			}
		}
		c := r.Replica.Client()
		defer c.Close()
		info, err := c.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master")
	})
	return time.Since(begin)
}

// AttachReplica starts a new replica of the promoted replica, as an
// operator (or the old primary's restart) would after a failover, and
// waits until it is in sync: until then, a store that waits for a replica
// fails every write, closed. It becomes r.Replica's replica; r.Primary is
// the promoted one afterwards.
func (r *Redis) AttachReplica() time.Duration {
	r.t.Helper()
	begin := time.Now()
	r.Primary, r.Relay = r.Replica, nil
	// The promoted replica has the default delay before a full sync.
	c := r.Primary.Client()
	defer c.Close()
	if err := c.ConfigSet(context.Background(), "repl-diskless-sync-delay", "0").Err(); err != nil {
		r.t.Fatal(err)
	}
	r.Replica = redistest.Start(r.t, "--save", "", "--appendonly", "no", "--replicaof", "127.0.0.1", strconv.Itoa(r.Primary.Port()))
	r.waitReplicated()
	return time.Since(begin)
}

// waitReplicated waits until the primary has the replica online and
// streaming: after a full sync, a primary streams writes to a replica
// only once it has acknowledged (its first REPLCONF ACK, up to a second
// later), so a write is acknowledged (WAIT) before the test begins.
func (r *Redis) waitReplicated() {
	c := r.Primary.Client()
	defer c.Close()
	r.poll(10*time.Second, "the replica did not connect", func(ctx context.Context) bool {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "connected_slaves:1") || !strings.Contains(info, ",state=online,") {
			return false
		}
		pipe := c.Pipeline()
		pipe.Set(ctx, "failover:probe", "", 0)
		acks := pipe.Do(ctx, "wait", 1, 100)
		_, _ = pipe.Exec(ctx)
		n, err := acks.Int64()
		return err == nil && n == 1
	})
}

// waitSentinels waits until each Sentinel knows the replica and the other
// Sentinels (they announce themselves every 2 s).
func (r *Redis) waitSentinels() {
	r.poll(30*time.Second, "the Sentinels did not find each other and the replica", func(ctx context.Context) bool {
		for _, p := range r.sentinels {
			s := redis.NewSentinelClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p)})
			m, err := s.Master(ctx, MasterName).Result()
			s.Close()
			if err != nil || m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" {
				return false
			}
		}
		return true
	})
}

// poll calls ok every 50 ms until it reports true, and fails the test
// with msg after limit: a bound on a process that never comes up, not a
// timing the test depends on.
func (r *Redis) poll(limit time.Duration, msg string, ok func(context.Context) bool) {
	r.t.Helper()
	poll(r.t, limit, msg, ok)
}

func poll(t testing.TB, limit time.Duration, msg string, ok func(context.Context) bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		done := ok(ctx)
		cancel()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s within %v", msg, limit)
		}
	}
}

// freePort returns a loopback port no one listened on a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
