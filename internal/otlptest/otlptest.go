// Package otlptest is an OTLP/HTTP trace receiver for tests: a real HTTP
// server on a loopback port that decodes each export request
// (protobuf, or JSON, optionally gzipped, as OTLP/HTTP sends them) and
// keeps the spans, for tests to check the span tree an exporter sent.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// A Span is one span as received.
type Span struct {
	TraceID, SpanID, ParentID string // lower-case hex; ParentID "" for a root
	Name                      string
	Kind                      string // as the protocol names it: SPAN_KIND_SERVER, …
	Attrs                     map[string]string
	Status                    string // STATUS_CODE_UNSET, _OK or _ERROR
	TraceState                string // the W3C tracestate the span carries
	Service                   string // the resource's service.name
}

// A Receiver collects the spans exported to it.
type Receiver struct {
	// URL is the receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (the
	// exporter appends /v1/traces).
	URL string

	mu       sync.Mutex
	spans    []Span
	requests int
	bad      []string // requests that did not decode
}

// Start starts a receiver on a loopback port, stopped when the test ends.
func Start(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	spans, err := decode(req)
	r.mu.Lock()
	r.requests++
	if err != nil {
		r.bad = append(r.bad, err.Error())
	}
	r.spans = append(r.spans, spans...)
	r.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

func decode(req *http.Request) ([]Span, error) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		return nil, fmt.Errorf("%s %s: want POST /v1/traces", req.Method, req.URL.Path)
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, err
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		return nil, err
	}
	var msg coltracepb.ExportTraceServiceRequest
	switch ct := req.Header.Get("Content-Type"); ct {
	case "application/x-protobuf":
		err = proto.Unmarshal(b, &msg)
	case "application/json":
		err = protojson.Unmarshal(b, &msg)
	default:
		err = fmt.Errorf("content type %q", ct)
	}
	if err != nil {
		return nil, err
	}
	var out []Span
	for _, rs := range msg.ResourceSpans {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				out = append(out, Span{
					TraceID:    hex.EncodeToString(s.TraceId),
					SpanID:     hex.EncodeToString(s.SpanId),
					ParentID:   hex.EncodeToString(s.ParentSpanId),
					Name:       s.Name,
					Kind:       s.Kind.String(),
					Attrs:      attrs(s.Attributes),
					Status:     s.GetStatus().GetCode().String(),
					TraceState: s.TraceState,
					Service:    service,
				})
			}
		}
	}
	return out, nil
}

// attrs renders attributes as strings (a bool as true or false, a number
// in decimal).
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = x.StringValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = fmt.Sprint(x.DoubleValue)
		default:
			m[kv.Key] = v.String()
		}
	}
	return m
}

// Spans returns the spans received so far, in the order they came.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests reports how many export requests came, and the errors of those
// that did not decode.
func (r *Receiver) Requests() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, append([]string(nil), r.bad...)
}

// Trace returns the spans received of trace id.
func (r *Receiver) Trace(id string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	return out
}

// WaitFor waits up to timeout for spans to satisfy done, and returns them.
func (r *Receiver) WaitFor(timeout time.Duration, done func([]Span) bool) ([]Span, bool) {
	deadline := time.Now().Add(timeout)
	for {
		spans := r.Spans()
		if done(spans) {
			return spans, true
		}
		if time.Now().After(deadline) {
			return spans, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Tree renders spans as an indented tree, children under their parent in
// the order they came, for failure messages.
func Tree(spans []Span) string {
	var b strings.Builder
	known := map[string]bool{}
	for _, s := range spans {
		known[s.SpanID] = true
	}
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, s := range spans {
			if s.ParentID == parent || (depth == 0 && !known[s.ParentID] && s.ParentID != "" && parent == "") {
				fmt.Fprintf(&b, "%s%s [%s/%s parent %s] %v\n", strings.Repeat("  ", depth), s.Name, s.TraceID, s.SpanID, s.ParentID, s.Attrs)
				walk(s.SpanID, depth+1)
			}
		}
	}
	walk("", 0)
	return b.String()
}
