package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
)

// TestIssueIDSource checks where ids come from: crypto/rand by default
// (distinct ids), Options.Rand when set (its bytes, in order), and that a
// source that fails or runs short issues nothing.
func TestIssueIDSource(t *testing.T) {
	want := ledger.ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, tt := range []struct {
		name    string
		rand    io.Reader
		wantID  *ledger.ID // nil: any id, distinct from the previous one
		wantErr error      // nil: no error
	}{
		{name: "default", rand: nil},
		{name: "given", rand: bytes.NewReader(want[:]), wantID: &want},
		{name: "failing", rand: iotest.ErrReader(errBroken), wantErr: errBroken},
		{name: "short", rand: bytes.NewReader(want[:15]), wantErr: io.ErrUnexpectedEOF},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := ledger.NewMemory(ledger.MemoryOptions{})
			l, err := ledger.New(m, ledger.Options{Rand: tt.rand})
			if err != nil {
				t.Fatal(err)
			}
			c, err := l.Issue(context.Background(), ledger.Confirmation{Tool: "t", Principal: "p"})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Issue: %v, want %v", err, tt.wantErr)
				}
				if remembered, _ := m.Len(); remembered != 0 {
					t.Fatalf("a failed Issue left %d confirmations in the store", remembered)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantID != nil {
				if c.ID != *tt.wantID {
					t.Fatalf("id %s, want %s", c.ID, tt.wantID)
				}
				return
			}
			again, err := l.Issue(context.Background(), ledger.Confirmation{Tool: "t", Principal: "p"})
			if err != nil {
				t.Fatal(err)
			}
			if c.ID == again.ID || c.ID == (ledger.ID{}) {
				t.Fatalf("ids %s and %s from crypto/rand", c.ID, again.ID)
			}
		})
	}
}

var errBroken = errors.New("broken source")

// chosenIDs is a store that chooses its ids: the next of ids.
type chosenIDs struct {
	*ledger.Memory
	ids        []ledger.ID
	principals []string // asked for
}

func (s *chosenIDs) NewID(principal string) ledger.ID {
	s.principals = append(s.principals, principal)
	id := s.ids[0]
	s.ids = s.ids[1:]
	return id
}

// TestIssueFromIDSource checks that a store that chooses its ids gets asked,
// with the confirmation's principal, and that Options.Rand still wins.
func TestIssueFromIDSource(t *testing.T) {
	want := ledger.ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	store := &chosenIDs{Memory: ledger.NewMemory(ledger.MemoryOptions{}), ids: []ledger.ID{want}}
	l, err := ledger.New(store, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Issue(context.Background(), ledger.Confirmation{Tool: "t", Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != want || len(store.principals) != 1 || store.principals[0] != "alice" {
		t.Fatalf("issued %s, store asked for %q; want %s for [alice]", c.ID, store.principals, want)
	}
	given := ledger.ID{0xff, 0xfe}
	l, err = ledger.New(store, ledger.Options{Rand: bytes.NewReader(given[:])})
	if err != nil {
		t.Fatal(err)
	}
	if c, err = l.Issue(context.Background(), ledger.Confirmation{Tool: "t", Principal: "bob"}); err != nil || c.ID != given || len(store.principals) != 1 {
		t.Fatalf("with Options.Rand: issued %s, %v, store asked %d times; want %s, once", c.ID, err, len(store.principals), given)
	}
}
