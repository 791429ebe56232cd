// Package filetool is the reference destructive tool: delete_file deletes
// one regular file inside directories fixed when the server starts, after
// the person confirms, at most once.
//
// What it guarantees:
//   - The roots are fixed at start-up (opened as [os.Root]); the agent
//     cannot choose or widen them. With no root, every call is refused.
//   - A path outside every root is refused before anything is asked, both
//     lexically and by os.Root, which also refuses symlinks that escape.
//   - The question shows the sanitized path and the file's size.
//   - At execution, after the confirmation is redeemed, the entry is looked
//     up again without following a final symlink and must still be the same
//     regular file: same device, inode, size, modification time and mode.
//     A path that became a symlink, or another file, is refused.
//
// What it does not guarantee: Linux cannot unlink by handle, so a process
// with write access to the directory can still swap the entry in the
// microseconds between the final check and the unlink; os.Root keeps even
// that inside the roots. os.Root does not stop bind mounts or hard links
// that lead out of a root.
package filetool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
)

// Name is the tool's name.
const Name = "delete_file"

// Options configures the tool.
type Options struct {
	// Roots are the directories inside which files may be deleted.
	Roots []string
	// Flow runs the confirmation. Required.
	Flow *confirm.Flow
}

// Tool is the delete_file tool.
type Tool struct {
	roots []root
	flow  *confirm.Flow
}

type root struct {
	names []string // absolute spellings that refer to it: as given, and with symlinks resolved
	fs    *os.Root
}

// Input is the tool's argument.
type Input struct {
	Path string `json:"path" jsonschema:"absolute path of the file to delete, inside one of the server's roots (a path relative to the root is accepted when the server has exactly one)"`
}

// New opens the roots. Every root must be an existing directory.
func New(opts Options) (*Tool, error) {
	if opts.Flow == nil {
		return nil, errors.New("filetool: Options.Flow is required")
	}
	t := &Tool{flow: opts.Flow}
	for _, dir := range opts.Roots {
		r, err := openRoot(dir)
		if err != nil {
			t.Close()
			return nil, err
		}
		t.roots = append(t.roots, r)
	}
	return t, nil
}

func openRoot(dir string) (root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return root{}, fmt.Errorf("filetool: root %q: %w", dir, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return root{}, fmt.Errorf("filetool: root %q: %w", dir, err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return root{}, fmt.Errorf("filetool: root %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return root{}, fmt.Errorf("filetool: root %q is not a directory", dir)
	}
	r, err := os.OpenRoot(resolved)
	if err != nil {
		return root{}, fmt.Errorf("filetool: root %q: %w", dir, err)
	}
	names := []string{resolved}
	if abs != resolved {
		names = append(names, abs)
	}
	return root{names: names, fs: r}, nil
}

// Close releases the roots.
func (t *Tool) Close() error {
	var errs []error
	for _, r := range t.roots {
		errs = append(errs, r.fs.Close())
	}
	return errors.Join(errs...)
}

// Register adds delete_file to s.
func (t *Tool) Register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name:        Name,
		Description: "Delete one regular file inside the server's configured roots. The user is asked to confirm; the file is re-checked just before deletion.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: false},
	}, t.handle)
}

func ptr[T any](v T) *T { return &v }

func (t *Tool) handle(ctx context.Context, req *mcp.CallToolRequest, in Input) (*mcp.CallToolResult, any, error) {
	res, err := t.flow.Run(ctx, req, confirm.Step{
		Ask: func(context.Context) (confirm.Question, error) { return t.ask(in.Path) },
		Act: func(_ context.Context, c ledger.Confirmation) (*mcp.CallToolResult, error) { return t.act(in.Path, c) },
	})
	return res, nil, err
}

// target is a validated path: which root, and the path inside it.
type target struct {
	root *root
	rel  string
}

// Resolve maps a client's path to a root and a path inside it, or refuses.
func (t *Tool) resolve(path string) (target, error) {
	if len(t.roots) == 0 {
		// No root configured: refuse everything rather than default to any
		// directory.
		return target{}, confirm.Refuse("This server has no --root configured, so it refuses every deletion.")
	}
	if path == "" || strings.IndexByte(path, 0) >= 0 {
		return target{}, confirm.Refuse("The path is empty or contains a NUL byte.")
	}
	if !filepath.IsAbs(path) {
		if len(t.roots) != 1 {
			return target{}, confirm.Refuse("The path must be absolute: this server has several roots.")
		}
		path = filepath.Join(t.roots[0].names[0], path)
	}
	clean := filepath.Clean(path)
	for i := range t.roots {
		r := &t.roots[i]
		for _, name := range r.names {
			rel, ok := strings.CutPrefix(clean, name+string(filepath.Separator))
			// Lexical containment first: "..", and a sibling like
			// /srv/data-evil for root /srv/data, never reach os.Root.
			if ok && rel != "" && filepath.IsLocal(rel) {
				return target{root: r, rel: rel}, nil
			}
		}
	}
	return target{}, confirm.Refuse("The path %s is outside the server's roots; nothing was asked or deleted.", prompt.Value(path, prompt.Options{}))
}

// identity is what must not change between the question and the deletion.
type identity struct {
	dev, ino uint64
	size     int64
	mtimeNs  int64
	mode     fs.FileMode
}

func (id identity) String() string {
	b, _ := json.Marshal(map[string]any{"dev": id.dev, "ino": id.ino, "size": id.size, "mtime_ns": id.mtimeNs, "mode": uint32(id.mode)})
	return string(b)
}

// lstat looks up the entry itself (a final symlink is not followed) and
// returns its identity if it is a regular file.
func (tg target) lstat() (identity, error) {
	fi, err := tg.root.fs.Lstat(tg.rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return identity{}, confirm.Refuse("No such file.")
		}
		// os.Root refuses symlinks and ".." that lead outside the root.
		return identity{}, confirm.Refuse("The path cannot be used: %v", errors.Unwrap(err))
	}
	if !fi.Mode().IsRegular() {
		// A symlink (even to a file inside the root), directory, device or
		// socket is refused: the person is asked about one regular file.
		return identity{}, confirm.Refuse("Not a regular file (it is a %s).", kind(fi.Mode()))
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return identity{}, errors.New("filetool: no device and inode on this platform")
	}
	return identity{
		dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(),
		mtimeNs: fi.ModTime().UnixNano(), mode: fi.Mode(),
	}, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// Locate validates path exactly as the first round does — inside a root,
// not escaping it through "..", symlinks or a sibling's name, and naming a
// regular file — and returns the file's absolute path under its root. An
// error is a [confirm.Refusal] saying why.
func (t *Tool) Locate(path string) (string, error) {
	tg, _, err := t.locate(path)
	if err != nil {
		return "", err
	}
	return tg.shown(), nil
}

func (t *Tool) locate(path string) (target, identity, error) {
	tg, err := t.resolve(path)
	if err != nil {
		return target{}, identity{}, err
	}
	id, err := tg.lstat()
	if err != nil {
		return target{}, identity{}, err
	}
	return tg, id, nil
}

// shown is the path as the person sees it: under the root's resolved name.
func (tg target) shown() string { return filepath.Join(tg.root.names[0], tg.rel) }

func (t *Tool) ask(path string) (confirm.Question, error) {
	tg, id, err := t.locate(path)
	if err != nil {
		return confirm.Question{}, err
	}
	msg := fmt.Sprintf("Delete the file %s (%s)? This cannot be undone.",
		prompt.Path(tg.shown(), prompt.Options{}), size(id.size))
	for _, w := range prompt.PathWarnings(tg.shown()) {
		msg += " Note: the name " + strings.TrimPrefix(string(w), "it ") + "."
	}
	return confirm.Question{Message: msg, Subject: id.String()}, nil
}

func size(n int64) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

func (t *Tool) act(path string, c ledger.Confirmation) (*mcp.CallToolResult, error) {
	tg, id, err := t.locate(path)
	if err != nil {
		return nil, confirm.Refuse("The file changed after it was approved: %s Nothing was deleted.", err)
	}
	if id.String() != c.Subject {
		// Same name, different object: replaced, rewritten or re-linked
		// after the person approved. The approval was for the old one.
		return nil, confirm.Refuse("The file was replaced or modified after it was approved. Nothing was deleted.")
	}
	if err := tg.root.fs.Remove(tg.rel); err != nil {
		return nil, fmt.Errorf("filetool: remove: %w", err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
		Text: fmt.Sprintf("Deleted %s.", prompt.Path(tg.shown(), prompt.Options{})),
	}}}, nil
}
