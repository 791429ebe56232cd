// Package mcptest drives a go-sdk MCP server the way this project's tests
// must: through a real go-sdk client, over a real transport (in-memory or
// streamable HTTP), in either protocol era, with an elicitation handler
// that records every question. It also holds the assertions those tests
// share: which layer refused a call (the requestState boundary's one frozen
// JSON-RPC error, or a tool error) and what a result says.
//
// It is for tests only; nothing in it is safe to serve.
package mcptest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// Protocol eras.
const (
	EraMRTR   = requeststate.ProtocolMRTR // multi round-trip requests: the client retries
	EraLegacy = "2025-11-25"              // the server elicits in-process
)

// Transports.
const (
	InMemory = "in-memory"
	HTTP     = "http"
)

// SyncBuffer is a log sink safe for concurrent writes.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An Answerer is a client's elicitation handler: it records the questions
// and answers each with Action ("accept", "decline" or "cancel"), with
// confirm = Confirm when accepting a form. A URL elicitation (an approval
// page's link) it records as a URL too, and answers with URLAction, or
// Action when that is empty, with no content.
type Answerer struct {
	Action    string
	Confirm   bool
	URLAction string
	Before    func() // if set, runs before each answer, while the question is open
	Fail      error  // if set, the dialog fails with it instead of answering
	mu        sync.Mutex
	asked     []string
	urls      []string
}

// Accept answers yes; Decline answers no.
func Accept() *Answerer  { return &Answerer{Action: "accept", Confirm: true} }
func Decline() *Answerer { return &Answerer{Action: "decline"} }

// Handle is an mcp.ClientOptions.ElicitationHandler.
func (a *Answerer) Handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.mu.Lock()
	a.asked = append(a.asked, req.Params.Message)
	if req.Params.Mode == "url" {
		a.urls = append(a.urls, req.Params.URL)
	}
	a.mu.Unlock()
	if a.Before != nil {
		a.Before()
	}
	if a.Fail != nil {
		return nil, a.Fail
	}
	if req.Params.Mode == "url" {
		if a.URLAction != "" {
			return &mcp.ElicitResult{Action: a.URLAction}, nil
		}
		return &mcp.ElicitResult{Action: a.Action}, nil
	}
	r := &mcp.ElicitResult{Action: a.Action}
	// Content with a decline or cancel too, if Confirm: a client that
	// sends confirm=true beside another action (a server must read the
	// action first).
	if a.Action == "accept" || a.Confirm {
		r.Content = map[string]any{"confirm": a.Confirm}
	}
	return r, nil
}

// Questions returns the questions asked so far.
func (a *Answerer) Questions() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

// URLs returns the links of the URL elicitations so far.
func (a *Answerer) URLs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.urls...)
}

// Yes is an approving answer, as a retry carries it.
func Yes() *mcp.ElicitResult {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}
}

// ClientOptions configures [Connect].
type ClientOptions struct {
	Era       string // default EraMRTR
	Transport string // InMemory (default) or HTTP
	Answer    *Answerer
	// Manual (2026-07-28 only) returns input_required results to the test
	// instead of retrying.
	Manual bool
	// Client holds further client options; Answer and Manual are set on it.
	Client *mcp.ClientOptions
	// Header is added to every HTTP request (e.g. Authorization).
	Header http.Header
	// Name is the client's name in its clientInfo; default "test-client".
	Name string
	// URL declares URL elicitation besides form (an approval page's
	// link); Answer must be set.
	URL bool
}

// Connect starts a real go-sdk client session to s: over an in-memory
// transport, or over streamable HTTP served by h (which must serve s).
func Connect(tb testing.TB, s *mcp.Server, h http.Handler, o ClientOptions) *mcp.ClientSession {
	tb.Helper()
	copts := &mcp.ClientOptions{}
	if o.Client != nil {
		copts = o.Client
	}
	if o.Answer != nil {
		copts.ElicitationHandler = o.Answer.Handle
	}
	if o.Manual {
		copts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	if o.URL {
		if copts.Capabilities == nil {
			copts.Capabilities = &mcp.ClientCapabilities{}
		}
		copts.Capabilities.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}
	}
	name := o.Name
	if name == "" {
		name = "test-client"
	}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, copts)
	ctx := context.Background()
	var t mcp.Transport
	switch o.Transport {
	case InMemory, "":
		ct, st := mcp.NewInMemoryTransports()
		ss, err := s.Connect(ctx, st, nil)
		if err != nil {
			tb.Fatalf("server connect: %v", err)
		}
		tb.Cleanup(func() { ss.Close() })
		t = ct
	case HTTP:
		hs := httptest.NewServer(h)
		tb.Cleanup(hs.Close)
		hc := hs.Client()
		if o.Header != nil {
			hc = &http.Client{Transport: HeaderTransport{Header: o.Header, Next: hc.Transport}}
		}
		t = &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hc}
	default:
		tb.Fatalf("unknown transport %q", o.Transport)
	}
	era := o.Era
	if era == "" {
		era = EraMRTR
	}
	cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		tb.Fatalf("client connect (%s, %s): %v", era, o.Transport, err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

// A HeaderTransport adds Header to every request before Next sends it.
type HeaderTransport struct {
	Header http.Header
	Next   http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (h HeaderTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.Header {
		r.Header[k] = v
	}
	return h.Next.RoundTrip(r)
}

// Describe says what a tools/call result is, for failure messages.
func Describe(res *mcp.CallToolResult) string {
	switch {
	case res == nil:
		return "<nil result>"
	case res.NeedsInput():
		return "input_required"
	case res.IsError:
		return "tool error: " + Text(res)
	}
	return "result: " + Text(res)
}

// Text is the text content of a result.
func Text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// WantBoundaryRefusal asserts that the requestState boundary refused the
// call: a JSON-RPC error with exactly the frozen code, message and data.
func WantBoundaryRefusal(tb testing.TB, res *mcp.CallToolResult, err error) {
	tb.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		tb.Fatalf("want the boundary's JSON-RPC error, got err=%v res=%s", err, Describe(res))
	}
	if werr.Code != requeststate.RejectCode || werr.Message != requeststate.RejectMessage {
		tb.Fatalf("JSON-RPC error = %d %q, want %d %q", werr.Code, werr.Message, requeststate.RejectCode, requeststate.RejectMessage)
	}
	if got := strings.Join(strings.Fields(string(werr.Data)), ""); got != requeststate.RejectData {
		tb.Fatalf("JSON-RPC error data = %s, want %s", werr.Data, requeststate.RejectData)
	}
}

// WantToolRefusal asserts that the tool or its flow (not the boundary)
// refused the call: a tool error result mentioning want.
func WantToolRefusal(tb testing.TB, res *mcp.CallToolResult, err error, want string) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("want a tool error result, got a protocol error: %v", err)
	}
	if res == nil || !res.IsError || res.NeedsInput() {
		tb.Fatalf("want a tool error result, got %s", Describe(res))
	}
	if !strings.Contains(Text(res), want) {
		tb.Fatalf("tool error %q does not mention %q", Text(res), want)
	}
}

// WantArgumentsRefusal asserts that the requestState boundary refused a
// first round for its arguments: a JSON-RPC invalid-params error, not the
// frozen rejection, whose message begins with
// [requeststate.ArgumentsMessage] and mentions want.
func WantArgumentsRefusal(tb testing.TB, res *mcp.CallToolResult, err error, want string) {
	tb.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		tb.Fatalf("want the boundary's invalid-params error, got err=%v res=%s", err, Describe(res))
	}
	if werr.Code != jsonrpc.CodeInvalidParams || !strings.HasPrefix(werr.Message, requeststate.ArgumentsMessage) {
		tb.Fatalf("JSON-RPC error = %d %q, want %d %q…", werr.Code, werr.Message, jsonrpc.CodeInvalidParams, requeststate.ArgumentsMessage)
	}
	if !strings.Contains(werr.Message, want) {
		tb.Fatalf("JSON-RPC error %q does not mention %q", werr.Message, want)
	}
}
