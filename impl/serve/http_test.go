package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
	"github.com/mcp-confirm/mcp-confirm/impl/serve"
)

// Every limit's default, spelled out: changing one is a deliberate act.
func TestHTTPDefaults(t *testing.T) {
	h, err := serve.NewHTTP(newServer(), serve.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := h.Options()
	got.Logger = nil
	want := serve.HTTPOptions{
		MaxMessageBytes:   64 << 10,
		SessionTimeout:    10 * time.Minute,
		MaxSessions:       1000,
		RequestTimeout:    11 * time.Minute,
		MaxConns:          256,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    32 << 10,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", got, want)
	}
	if serve.DefaultSessionTimeout != 10*time.Minute || serve.DefaultRequestTimeout != serve.DefaultSessionTimeout+time.Minute {
		t.Fatal("the session timeout is no longer the default TTL, or the request timeout no longer outlives it by a minute")
	}
	for name, o := range map[string]serve.HTTPOptions{
		"MaxMessageBytes":   {MaxMessageBytes: -1},
		"SessionTimeout":    {SessionTimeout: -1},
		"MaxSessions":       {MaxSessions: -1},
		"RequestTimeout":    {RequestTimeout: -1},
		"MaxConns":          {MaxConns: -1},
		"ReadHeaderTimeout": {ReadHeaderTimeout: -1},
		"ReadTimeout":       {ReadTimeout: -1},
		"IdleTimeout":       {IdleTimeout: -1},
		"MaxHeaderBytes":    {MaxHeaderBytes: -1},
	} {
		if _, err := serve.NewHTTP(newServer(), o); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("negative %s: err = %v", name, err)
		}
	}
	if _, err := serve.NewHTTP(nil, serve.HTTPOptions{}); err == nil {
		t.Error("nil server accepted")
	}
}

func newServer() *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
}

// front runs a front door of s with opts on a loopback port until the test
// ends, and returns its URL.
func front(t *testing.T, s *mcp.Server, opts serve.HTTPOptions) string {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h, err := serve.NewHTTP(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// mrtrMeta is the _meta every 2026-07-28 request carries.
const mrtrMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`

// mrtrList is a 2026-07-28 ping.
// mrtrList is a 2026-07-28 request (that era has no ping).
const mrtrList = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + mrtrMeta + `}}`

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// post sends one JSON-RPC body, as era (empty: no protocol header).
func post(t *testing.T, c *http.Client, url, era, session, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if era != "" {
		req.Header.Set("Mcp-Protocol-Version", era)
	}
	if era >= requeststate.ProtocolMRTR {
		// The standard headers 2026-07-28 requires.
		var m struct {
			Method string
			Params struct{ Name string }
		}
		json.Unmarshal([]byte(body), &m)
		req.Header.Set("Mcp-Method", m.Method)
		if m.Params.Name != "" {
			req.Header.Set("Mcp-Name", m.Params.Name)
		}
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// initialize opens an older-era session and returns its id.
func initialize(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp := post(t, c, url, "", "", initBody)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %s, session %q", resp.Status, id)
	}
	return id
}

// A body over the limit gets 413 in both eras; one at the limit does not.
func TestHTTPBodyLimit(t *testing.T) {
	const max = 4096
	url := front(t, newServer(), serve.HTTPOptions{MaxMessageBytes: max})
	pad := func(era string, n int) string {
		b := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`
		if era == requeststate.ProtocolMRTR {
			b = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + mrtrMeta + `,"pad":"`
		}
		return b + strings.Repeat("x", n-len(b)-len(`"}}`)) + `"}}`
	}
	for _, era := range []string{"", requeststate.ProtocolMRTR} {
		for _, tt := range []struct {
			size int
			want int
		}{{max + 1, http.StatusRequestEntityTooLarge}, {max, http.StatusOK}} {
			t.Run(fmt.Sprintf("%q/%d", era, tt.size), func(t *testing.T) {
				session := ""
				if era == "" {
					session = initialize(t, http.DefaultClient, url)
				}
				resp := post(t, http.DefaultClient, url, era, session, pad(era, tt.size))
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tt.want {
					t.Fatalf("%d-byte body: %s, want %d", tt.size, resp.Status, tt.want)
				}
			})
		}
	}
}

// Beyond MaxSessions an initialize gets 503 and a JSON-RPC error and
// creates nothing; closing a session makes room; the stateless era has no
// sessions and is not capped.
func TestHTTPSessionCap(t *testing.T) {
	s := newServer()
	url := front(t, s, serve.HTTPOptions{MaxSessions: 3})
	var ids []string
	for range 3 {
		ids = append(ids, initialize(t, http.DefaultClient, url))
	}
	resp := post(t, http.DefaultClient, url, "", "", initBody)
	var w wire
	json.NewDecoder(resp.Body).Decode(&w)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || w.Error == nil || !strings.Contains(w.Error.Message, "Too many live sessions") || string(w.ID) != "null" {
		t.Fatalf("4th initialize: %s %+v", resp.Status, w)
	}
	if n := live(s); n != 3 {
		t.Fatalf("%d live sessions, want 3", n)
	}
	resp = post(t, http.DefaultClient, url, requeststate.ProtocolMRTR, "", mrtrList)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stateless ping at the cap: %s", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", ids[0])
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	time.Sleep(50 * time.Millisecond) // the cap counts again at most every 10 ms
	initialize(t, http.DefaultClient, url)
}

func live(s *mcp.Server) int {
	n := 0
	for ss := range s.Sessions() {
		if ss.ID() != "" {
			n++
		}
	}
	return n
}

// heapMB is the live heap and the goroutine stacks after a full
// collection, in MB.
func heapMB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc+m.StackInuse) / (1 << 20)
}

// initializeMany opens n sessions over a few connections.
func initializeMany(t *testing.T, url string, n int) []string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer c.CloseIdleConnections()
	ids := make([]string, n)
	start := time.Now()
	defer func() { t.Logf("%d sessions opened in %v", n, time.Since(start)) }()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				ids[i] = initialize(t, c, url)
			}
		})
	}
	wg.Wait()
	return ids
}

// Sessions whose client went away are closed after SessionTimeout and
// their memory is released; the control, whose timeout has not passed,
// keeps them (the issue measured 123 MB for 10,000 sessions; the built
// binary is measured with 10,000 in cmd/mcp-confirm's
// TestBinaryHTTPSessionsBounded).
func TestHTTPSessionTimeoutFreesMemory(t *testing.T) {
	const n = 2000
	var controlHeld float64
	for _, tt := range []struct {
		name    string
		timeout time.Duration
	}{{"control", time.Hour}, {"timeout", 500 * time.Millisecond}} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer()
			url := front(t, s, serve.HTTPOptions{SessionTimeout: tt.timeout, MaxSessions: n})
			before := heapMB()
			initializeMany(t, url, n)
			if tt.timeout == time.Hour {
				controlHeld = heapMB() - before
				if controlHeld < 5 || live(s) != n {
					t.Fatalf("%d sessions live holding %.1f MB: the measurement cannot tell", live(s), controlHeld)
				}
				for ss := range s.Sessions() {
					ss.Close()
				}
				return
			}
			for deadline := time.Now().Add(10 * time.Second); live(s) > 0 && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			left := heapMB() - before
			t.Logf("%d sessions held %.1f MB without a timeout; with one, %.1f MB are left once it passed", n, controlHeld, left)
			if live(s) != 0 || left > controlHeld/10 {
				t.Fatalf("after the timeout %d sessions live and %.1f MB held (%.1f MB without a timeout)", live(s), left, controlHeld)
			}
		})
	}
}

// An idle older-era session is closed after SessionTimeout: a real client's
// next call on it fails.
func TestHTTPSessionTimeoutClient(t *testing.T) {
	s := newServer()
	url := front(t, s, serve.HTTPOptions{SessionTimeout: 300 * time.Millisecond})
	c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Ping(context.Background(), nil); err != nil {
		t.Fatalf("ping within the timeout: %v", err)
	}
	time.Sleep(time.Second)
	if live(s) != 0 {
		t.Fatalf("%d sessions live after the timeout", live(s))
	}
	if err := cs.Ping(context.Background(), nil); err == nil {
		t.Fatal("ping on a timed-out session succeeded")
	}
}

// dial opens a raw connection to url's host.
func dial(t *testing.T, url string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedAfter waits (at most 5 s) for the server to close c, reading and
// discarding whatever it sends, and returns how long that took.
func closedAfter(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatal("the server kept the connection open for 5 s")
	}
	return time.Since(start)
}

// Slow headers, a slow body and an idle keep-alive connection are each
// closed by their timeout.
func TestHTTPConnectionTimeouts(t *testing.T) {
	const d = 300 * time.Millisecond
	url := front(t, newServer(), serve.HTTPOptions{ReadHeaderTimeout: d, ReadTimeout: 2 * d, IdleTimeout: d})
	host := strings.TrimPrefix(url, "http://")
	for _, tt := range []struct {
		name string
		send string
		max  time.Duration
	}{
		{"slow headers", "POST / HTTP/1.1\r\nHost: " + host + "\r\n", d},
		{"slow body", "POST / HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{", 2 * d},
		{"silent", "", d},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, url)
			io.WriteString(c, tt.send)
			if took := closedAfter(t, c); took > tt.max+time.Second {
				t.Fatalf("closed after %v, want about %v", took, tt.max)
			}
		})
	}
	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial(t, url)
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Method: tools/list\r\nMcp-Protocol-Version: %s\r\nContent-Length: %d\r\n\r\n%s",
			host, requeststate.ProtocolMRTR, len(mrtrList), mrtrList)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("ping: %v %v", resp, err)
		}
		// The response is read; now the connection idles.
		if took := closedAfter(t, c); took > d+time.Second {
			t.Fatalf("idle connection closed after %v, want about %v", took, d)
		}
	})
}

// At most MaxConns connections are served; the next waits until the
// timeouts free one.
func TestHTTPMaxConns(t *testing.T) {
	const d = 700 * time.Millisecond
	url := front(t, newServer(), serve.HTTPOptions{MaxConns: 2, ReadHeaderTimeout: d, IdleTimeout: d})
	dial(t, url)
	dial(t, url) // two silent connections hold both slots
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	resp := post(t, &http.Client{Timeout: 5 * time.Second}, url, requeststate.ProtocolMRTR, "", mrtrList)
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK || took < d/2 || took > d+2*time.Second {
		t.Fatalf("third connection served after %v (%s), want about %v", took, resp.Status, d)
	}
}

// Every request ends after RequestTimeout, a stream included: a tool that
// never returns is cancelled, and an older-era session's standalone SSE
// stream is closed.
func TestHTTPRequestTimeout(t *testing.T) {
	const d = 500 * time.Millisecond
	s := newServer()
	cancelled := make(chan struct{}, 1)
	mcp.AddTool(s, &mcp.Tool{Name: "hang"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		<-ctx.Done()
		cancelled <- struct{}{}
		return nil, nil, ctx.Err()
	})
	url := front(t, s, serve.HTTPOptions{RequestTimeout: d})
	t.Run("tool call", func(t *testing.T) {
		start := time.Now()
		resp := post(t, http.DefaultClient, url, requeststate.ProtocolMRTR, "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang","arguments":{},`+mrtrMeta+`}}`)
		io.Copy(io.Discard, resp.Body) // go-sdk ends the stream without a reply
		resp.Body.Close()
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("the tool's context was not cancelled")
		}
		if took := time.Since(start); took > d+time.Second {
			t.Fatalf("request ended after %v, want about %v", took, d)
		}
	})
	t.Run("SSE stream", func(t *testing.T) {
		id := initialize(t, http.DefaultClient, url)
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET: %v %v", resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if took := time.Since(start); took < d/2 || took > d+time.Second {
			t.Fatalf("stream ended after %v, want about %v", took, d)
		}
	})
}

// Auth runs before any session is created: a refused caller creates none
// and does not count against MaxSessions.
func TestHTTPAuthRunsFirst(t *testing.T) {
	s := newServer()
	var seen int
	var mu sync.Mutex
	deny := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen++
			mu.Unlock()
			http.Error(w, "no", http.StatusUnauthorized)
		})
	}
	url := front(t, s, serve.HTTPOptions{Auth: deny, MaxSessions: 1})
	for _, era := range []string{"", requeststate.ProtocolMRTR} {
		for range 3 {
			resp := post(t, http.DefaultClient, url, era, "", initBody)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("era %q: %s, want 401", era, resp.Status)
			}
		}
	}
	if seen != 6 || live(s) != 0 {
		t.Fatalf("auth saw %d requests, %d sessions live", seen, live(s))
	}
}

// Both protocol eras, through a real go-sdk client, from one address.
func TestHTTPBothEras(t *testing.T) {
	url := front(t, newServer(), serve.HTTPOptions{})
	for _, era := range []string{"2025-11-25", requeststate.ProtocolMRTR} {
		c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: era})
		if err != nil {
			t.Fatalf("%s: %v", era, err)
		}
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("%s: tools/list: %v", era, err)
		}
		if got := cs.InitializeResult(); era != requeststate.ProtocolMRTR && got.ProtocolVersion != era {
			t.Fatalf("negotiated %s, want %s", got.ProtocolVersion, era)
		}
		cs.Close()
	}
}

// The default message limit fits the largest delete_file call: a path of
// PATH_MAX (4096) bytes, every one escaped as \u00XX, with a generous
// requestState; headers over MaxHeaderBytes get 431.
func TestHTTPMessageLimitFitsLargestCall(t *testing.T) {
	path := strings.Repeat(`\u0001`, 4096)
	state := strings.Repeat("s", 2048) // sealed states are a few hundred bytes
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"` + path +
		`"},"inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}},"requestState":"` + state + `",` + mrtrMeta + `}}`
	t.Logf("largest delete_file call: %d bytes of %d", len(body), serve.DefaultMaxMessageBytes)
	if len(body) > serve.DefaultMaxMessageBytes/2 {
		t.Fatalf("the largest call is %d bytes: the default limit %d leaves too little room", len(body), serve.DefaultMaxMessageBytes)
	}
	url := front(t, newServer(), serve.HTTPOptions{})
	resp := post(t, http.DefaultClient, url, requeststate.ProtocolMRTR, "", body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusRequestEntityTooLarge {
		t.Fatal("the largest call got 413")
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(mrtrList))
	req.Header.Set("X-Pad", strings.Repeat("x", serve.DefaultMaxHeaderBytes+4096)) // net/http allows 4 KiB of slack
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversized headers: %v %v, want 431", resp, err)
	}
}

// The approval page is served beside the MCP endpoint, under its prefix,
// without passing through Auth (which refuses everything here): a bearer
// token is neither needed nor read there; everything else still passes
// through Auth, a path outside the prefix too. A prefix that is not a
// directory path is refused.
func TestHTTPPageBesideEndpoint(t *testing.T) {
	var authSeen, pageSeen []string
	var mu sync.Mutex
	deny := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			authSeen = append(authSeen, r.URL.Path)
			mu.Unlock()
			http.Error(w, "no", http.StatusUnauthorized)
		})
	}
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		pageSeen = append(pageSeen, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, "the page")
	})
	url := front(t, newServer(), serve.HTTPOptions{Auth: deny, Page: page, PagePrefix: "/base/approve/"})
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/base/approve/abc", http.StatusOK},
		{"/base/approve/callback", http.StatusOK},
		{"/base/approve", http.StatusUnauthorized},
		{"/base/approvex/abc", http.StatusUnauthorized},
		{"/", http.StatusUnauthorized},
		{"/mcp", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(http.MethodGet, url+tc.path, nil)
		req.Header.Set("Authorization", "Bearer caller-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: %s, want %d", tc.path, resp.Status, tc.status)
		}
	}
	if len(pageSeen) != 2 || len(authSeen) != 4 {
		t.Fatalf("the page saw %q, Auth saw %q: want 2 and 4", pageSeen, authSeen)
	}
	for _, bad := range []string{"", "approve/", "/approve", "approve"} {
		if _, err := serve.NewHTTP(newServer(), serve.HTTPOptions{Page: page, PagePrefix: bad}); err == nil {
			t.Errorf("PagePrefix %q accepted", bad)
		}
	}
}

// ForTTL ties the two limits a question's TTL bounds to it, where the
// options leave them zero: a session lives as long as a question could
// still be answered, and a request a minute longer, so that an older-era
// call waiting in-process for its answer can act and reply; limits set by
// hand stay as they are (the controls).
func TestForTTL(t *testing.T) {
	for _, c := range []struct {
		name                   string
		in                     serve.HTTPOptions
		session, request, read time.Duration
	}{
		{"zero", serve.HTTPOptions{}, 2 * time.Hour, 2*time.Hour + time.Minute, 0},
		{"set by hand", serve.HTTPOptions{SessionTimeout: time.Minute, RequestTimeout: 3 * time.Hour, ReadTimeout: time.Second}, time.Minute, 3 * time.Hour, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.in.ForTTL(2 * time.Hour)
			if got.SessionTimeout != c.session || got.RequestTimeout != c.request || got.ReadTimeout != c.read {
				t.Fatalf("ForTTL(2h) = session %v, request %v, read %v; want %v, %v, %v",
					got.SessionTimeout, got.RequestTimeout, got.ReadTimeout, c.session, c.request, c.read)
			}
		})
	}
}
