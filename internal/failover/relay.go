package failover

import (
	"net"
	"sync"
	"testing"
)

// A Relay forwards TCP connections from a loopback port to a target, as
// the network between a primary and its replica: a test can stall it
// (what either side sends is held, as on a congested or partitioned
// link) and sever it (the connections close, and what was held is lost:
// it never reached the other side).
type Relay struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond
	stalled bool
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
}

// NewRelay listens on a free loopback port and forwards each connection
// to target. It is closed when the test ends.
func NewRelay(t testing.TB, target string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{t: t, ln: ln, target: target, conns: make(map[net.Conn]bool)}
	r.cond = sync.NewCond(&r.mu)
	r.wg.Go(r.accept)
	t.Cleanup(r.close)
	return r
}

// Port is the port the relay listens on.
func (r *Relay) Port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// Stall holds everything either side sends from now on, until Resume or
// Sever.
func (r *Relay) Stall() {
	r.mu.Lock()
	r.stalled = true
	r.mu.Unlock()
}

// Resume forwards again, what was held first.
func (r *Relay) Resume() {
	r.mu.Lock()
	r.stalled = false
	r.cond.Broadcast()
	r.mu.Unlock()
}

// Sever closes every connection through the relay; what was held is
// dropped. New connections are accepted (and forwarded, unstalled) as
// before.
func (r *Relay) Sever() {
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	clear(r.conns)
	r.stalled = false
	r.cond.Broadcast()
	r.mu.Unlock()
}

func (r *Relay) close() {
	r.ln.Close()
	r.Sever()
	r.wg.Wait()
}

func (r *Relay) accept() {
	for {
		down, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			down.Close() // the target is gone: as a refused connection
			continue
		}
		r.mu.Lock()
		r.conns[down], r.conns[up] = true, true
		r.mu.Unlock()
		r.wg.Go(func() { r.pipe(up, down) })
		r.wg.Go(func() { r.pipe(down, up) })
	}
}

// pipe copies from src to dst, holding each chunk while the relay is
// stalled, and closes both when either ends or the relay severs them.
func (r *Relay) pipe(dst, src net.Conn) {
	defer func() {
		r.mu.Lock()
		delete(r.conns, src)
		delete(r.conns, dst)
		r.mu.Unlock()
		dst.Close()
		src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			for r.stalled && r.conns[src] {
				r.cond.Wait()
			}
			live := r.conns[src]
			r.mu.Unlock()
			if !live {
				return // severed while held: the chunk never arrives
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or closed
		}
	}
}
