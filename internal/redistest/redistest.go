// Package redistest starts redis-server processes of a test's own, for
// tests that need a Redis configured differently from the shared one
// (persistence, replicas): on a free loopback port, with their data in the
// test's temporary directory, stopped when the test ends. The shared
// server is never reconfigured.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server started by [Start].
type Server struct {
	t    testing.TB
	args []string
	port int
	cmd  *exec.Cmd
}

// Start runs redis-server with args (its configuration, e.g. "--save",
// "3600 1") and waits until it answers. It skips the test, naming the
// package to install, when redis-server is not on PATH.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("install redis-server (Debian: apt-get install redis-server) to run this test")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{t: t, port: port, args: append([]string{path, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", t.TempDir(), "--logfile", ""}, args...)}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Restart starts the server again (after [Server.Stop]) with the same
// configuration and data directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	c := s.Client()
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server %v did not start", s.args[1:])
		}
	}
}

// Stop kills the server, as a crash would: nothing is saved on the way.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Pause stops the server's process (SIGSTOP) without killing it: it
// neither answers nor reads what its primary sends, as a stalled or
// partitioned replica; its connections stay open. Resume continues it;
// Stop kills it either way.
func (s *Server) Pause() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatal(err)
	}
}

// Resume continues a server stopped by [Server.Pause].
func (s *Server) Resume() {
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Port is the server's port.
func (s *Server) Port() int { return s.port }

// URL is the server's redis:// URL, database 0.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Client returns a new client of the server; the caller closes it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port)})
}
