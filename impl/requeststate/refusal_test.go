package requeststate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/requeststate"
)

// refusals records what Options.Refused is told.
type refusals struct {
	mu  sync.Mutex
	got []requeststate.Refusal
}

func (r *refusals) hook(_ context.Context, _ string, c requeststate.Refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, c)
}

func (r *refusals) take() []requeststate.Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// TestRefusalClasses: every refusal the boundary makes is reported to
// Options.Refused once, with the class of its reason, through a real
// go-sdk client; a call it lets through is reported as nothing (the
// control). The wire gets the frozen rejection (or, for a first round's
// arguments, their error) whatever the class.
func TestRefusalClasses(t *testing.T) {
	rec := &refusals{}
	var mu sync.Mutex
	failPrincipal := false
	f := newFixture(t, requeststate.Options{Refused: rec.hook, Principal: func(context.Context, mcp.Request) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if failPrincipal {
			return "", errors.New("identity provider unreachable")
		}
		return "alice", nil
	}})
	cs := f.connect(t, "")
	ctx := context.Background()
	tok := firstRound(t, cs, `{"path":"a.txt"}`)

	otherKey := newFixture(t, requeststate.Options{Keys: [][]byte{[]byte("another-secret-another-secret-another")}})
	otherKeyTok := firstRound(t, otherKey.connect(t, ""), `{"path":"a.txt"}`)
	ahead := newFixture(t, requeststate.Options{})
	ahead.clk.Add(time.Hour)
	aheadTok := firstRound(t, ahead.connect(t, ""), `{"path":"a.txt"}`)
	flipped := []byte(tok) // one base64url character changed for another
	if i := len(flipped) / 2; flipped[i] == 'A' {
		flipped[i] = 'B'
	} else {
		flipped[i] = 'A'
	}

	for _, tt := range []struct {
		name, arguments, token string
		setup                  func()
		want                   requeststate.Refusal // "": let through
	}{
		{"control", `{"path":"a.txt"}`, tok, nil, ""},
		{"not a token", `{"path":"a.txt"}`, plaintext, nil, requeststate.RefusedMalformed},
		{"tampered", `{"path":"a.txt"}`, string(flipped), nil, requeststate.RefusedForged},
		{"retired key", `{"path":"a.txt"}`, otherKeyTok, nil, requeststate.RefusedUnknownKey},
		{"other arguments", `{"path":"b.txt"}`, tok, nil, requeststate.RefusedMismatch},
		{"issued in the future", `{"path":"a.txt"}`, aheadTok, nil, requeststate.RefusedFuture},
		{"duplicate key, first round", `{"path":"a.txt","path":"b.txt"}`, "", nil, requeststate.RefusedArguments},
		{"duplicate key, with a token", `{"path":"a.txt","path":"b.txt"}`, tok, nil, requeststate.RefusedArguments},
		{"principal unavailable", `{"path":"a.txt"}`, tok, func() { mu.Lock(); failPrincipal = true; mu.Unlock() }, requeststate.RefusedPrincipal},
		{"expired", `{"path":"a.txt"}`, tok, func() { mu.Lock(); failPrincipal = false; mu.Unlock(); f.clk.Add(requeststate.DefaultTTL) }, requeststate.RefusedExpired},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			before := f.rec.count()
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: args(tt.arguments), InputResponses: accept, RequestState: tt.token})
			got := rec.take()
			if tt.want == "" {
				if err != nil || len(got) != 0 {
					t.Fatalf("let through: err %v, reported %v", err, got)
				}
				return
			}
			if err == nil || f.rec.count() != before {
				t.Fatalf("not refused (err %v), or the handler ran", err)
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Fatalf("reported %v, want [%s]", got, tt.want)
			}
		})
	}
}
