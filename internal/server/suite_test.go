package server_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/confirm/confirmtest"
	"github.com/mcp-confirm/mcp-confirm/internal/server"
)

// files is what delete_file acts on in the front-end suite: a root
// directory with one file per subject, and the deletions seen so far.
type files struct {
	root    string
	mu      sync.Mutex
	made    map[string]bool // subjects whose file was created
	deleted map[string]int  // deletions seen by Ready
}

func (f *files) path(subject string) string { return filepath.Join(f.root, subject+".txt") }

// gone reports whether subject's file was created and is deleted now.
func (f *files) gone(subject string) bool {
	_, err := os.Lstat(f.path(subject))
	return f.made[subject] && errors.Is(err, fs.ErrNotExist)
}

// Call deletes subject's file.
func (f *files) Call(subject string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": f.path(subject)}}
}

// Ready creates subject's file again (same path, new file) once deleted,
// counting the deletion.
func (f *files) Ready(subject string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone(subject) {
		f.deleted[subject]++
	}
	if err := os.WriteFile(f.path(subject), []byte(subject), 0o644); err != nil {
		panic(err) // a temporary directory of the test's own
	}
	f.made[subject] = true
}

// Effects counts the deletions of subject's file.
func (f *files) Effects(subject string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.deleted[subject]
	if f.gone(subject) {
		n++
	}
	return n
}

// frontEnd is the front-end suite's factory for the reference server:
// delete_file on files in a root of its own, which replicas share.
func frontEnd() confirmtest.Factory {
	var mu sync.Mutex
	targets := map[*confirmtest.FrontEnd]*files{}
	start := func(t testing.TB, setup confirm.Setup, f *files) *confirmtest.FrontEnd {
		srv, err := server.New(server.Options{Setup: setup, Roots: []string{f.root}})
		if err != nil {
			t.Fatalf("server.New: %v", err)
		}
		t.Cleanup(func() { srv.Close() })
		fe := &confirmtest.FrontEnd{Server: srv.MCP(), Call: f.Call, Ready: f.Ready, Effects: f.Effects}
		mu.Lock()
		targets[fe] = f
		mu.Unlock()
		return fe
	}
	return confirmtest.Factory{
		New: func(t testing.TB, setup confirm.Setup) *confirmtest.FrontEnd {
			return start(t, setup, &files{root: t.TempDir(), made: map[string]bool{}, deleted: map[string]int{}})
		},
		Replica: func(t testing.TB, fe *confirmtest.FrontEnd, setup confirm.Setup) *confirmtest.FrontEnd {
			mu.Lock()
			f, ok := targets[fe]
			mu.Unlock()
			if !ok {
				t.Fatal("Replica of a front end the factory did not make")
			}
			return start(t, setup, f)
		},
	}
}

// The shared contract of a confirming front end, on the reference server.
func TestFrontEndSuite(t *testing.T) { confirmtest.Run(t, frontEnd()) }
