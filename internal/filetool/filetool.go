// Package filetool is the reference destructive tool: delete_file deletes
// one regular file inside directories fixed when the server starts, after
// the person confirms, at most once.
//
// Paths are resolved by package beneath: each root is opened once, and a
// path's parent directory is resolved component by component without
// following a symbolic link anywhere and without crossing a mount point.
//
// What it guarantees:
//   - The roots are fixed at start-up; the agent cannot choose or widen
//     them. With no root, every call is refused. On every call each name a
//     root is known by must still name the directory opened at start-up, or
//     the call is refused: the path shown is the directory acted on.
//   - Before anything is asked, a path is refused if it is over PATH_MAX
//     bytes or has a component over NAME_MAX (before any other work), lies
//     outside every root, goes through a symbolic link or mount point (the
//     refusal names the component), or does not name a regular file.
//   - The question shows the sanitized path and the file's size, and the
//     confirmation's Subject binds the identity (device, inode) of the
//     file's parent directory and of the file (with its size, modification
//     time and mode).
//   - At execution, after the confirmation is redeemed, the parent is
//     resolved again the same way and must be the same directory; the entry
//     is looked up in that directory handle without following a symbolic
//     link (fstatat) and must be the same regular file; it is then unlinked
//     through that same handle (unlinkat, which never removes a directory).
//     Nothing is resolved from the root a second time.
//
// What it does not guarantee (package beneath says why): the entry's own
// name is looked up twice in that one directory handle, by fstatat and by
// unlinkat, because Linux cannot unlink by handle. In between, whoever can
// write that directory can rename another entry to that name, and that
// entry is unlinked instead: an entry of the approved directory that the
// same person could have deleted themselves (TestRemainingWindow moves one
// there as an unprivileged user), never a directory, never anything
// elsewhere. A file with several hard links loses only the approved name.
package filetool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-confirm/mcp-confirm/impl/confirm"
	"github.com/mcp-confirm/mcp-confirm/impl/ledger"
	"github.com/mcp-confirm/mcp-confirm/impl/prompt"
	"github.com/mcp-confirm/mcp-confirm/internal/beneath"
)

// Name is the tool's name.
const Name = "delete_file"

// Options configures the tool.
type Options struct {
	// Roots are the directories inside which files may be deleted.
	Roots []string
	// Flow runs the confirmation. Required.
	Flow *confirm.Flow
	// Beneath configures path resolution (zero: openat2 where the kernel
	// has it).
	Beneath beneath.Options
}

// Tool is the delete_file tool.
type Tool struct {
	roots *beneath.Roots
	flow  *confirm.Flow
	// beforeUnlink, when set (tests only), runs between the final check and
	// the unlink: the window package beneath documents.
	beforeUnlink func()
}

// Input is the tool's argument.
type Input struct {
	Path string `json:"path" jsonschema:"absolute path of the file to delete, inside one of the server's roots (a path relative to the root is accepted when the server has exactly one)"`
}

// New opens the roots. Every root must be an existing directory; the same
// directory given twice is one root known by both names.
func New(opts Options) (*Tool, error) {
	if opts.Flow == nil {
		return nil, errors.New("filetool: Options.Flow is required")
	}
	roots, err := beneath.OpenRoots(opts.Roots, opts.Beneath)
	if err != nil {
		return nil, fmt.Errorf("filetool: %w", err)
	}
	return &Tool{roots: roots, flow: opts.Flow}, nil
}

// Close releases the roots.
func (t *Tool) Close() error {
	return t.roots.Close()
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
	root *beneath.Root
	rel  string
}

// resolve maps a client's path to a root and a path inside it, or refuses.
// It touches the filesystem only to check the root's names.
func (t *Tool) resolve(path string) (target, error) {
	if t.roots.Len() == 0 {
		// No root configured: refuse everything rather than default to any
		// directory.
		return target{}, confirm.Refuse("This server has no --root configured, so it refuses every deletion.")
	}
	// Bounds first: a 3 MiB path costs nothing more than a 4 KiB one.
	if err := beneath.CheckLength(path); err != nil {
		return target{}, confirm.Refuse("The path cannot be used: %s.", strings.TrimPrefix(err.Error(), "beneath: "))
	}
	if path == "" || strings.IndexByte(path, 0) >= 0 {
		return target{}, confirm.Refuse("The path is empty or contains a NUL byte.")
	}
	if !filepath.IsAbs(path) {
		if t.roots.Len() != 1 {
			return target{}, confirm.Refuse("The path must be absolute: this server has several roots.")
		}
		path = filepath.Join(t.roots.All()[0].Names()[0], path)
	}
	// Lexical containment first: "..", and a sibling like /srv/data-evil
	// for root /srv/data, never reach the filesystem.
	r, rel, err := t.roots.Find(filepath.Clean(path))
	if err != nil || rel == "" {
		return target{}, confirm.Refuse("The path %s is outside the server's roots.", prompt.Path(path, prompt.Options{}))
	}
	// A root renamed away and replaced: the name shown would be another
	// directory than the one acted on.
	if err := r.Check(); err != nil {
		return target{}, confirm.Refuse("The root %s; restart the server to use what is there now.", strings.TrimPrefix(err.Error(), "beneath: "))
	}
	return target{root: r, rel: rel}, nil
}

// identity is what must not change between the question and the deletion:
// the parent directory, and the file in it.
type identity struct {
	dir      beneath.ID
	dev, ino uint64
	size     int64
	mtimeNs  int64
	mode     fs.FileMode
}

// String is the confirmation's Subject: "dirdev:dirino/dev:ino size mtime
// mode", about 60 bytes.
func (id identity) String() string {
	return fmt.Sprintf("%d:%d/%d:%d %d %d %o", id.dir.Dev, id.dir.Ino, id.dev, id.ino, id.size, id.mtimeNs, uint32(id.mode))
}

// open resolves the target's parent beneath its root (no symlink, no mount
// crossing) and looks the entry up in that handle without following a
// final symlink. It returns the open parent (the caller closes it), the
// entry's name and identity, if it is a regular file.
func (tg target) open() (*beneath.Dir, string, identity, error) {
	dir, name, err := tg.root.OpenParent(tg.rel)
	if err != nil {
		return nil, "", identity{}, tg.refusal(err)
	}
	e, err := dir.Lstat(name)
	if err != nil {
		dir.Close()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", identity{}, confirm.Refuse("No such file.")
		}
		return nil, "", identity{}, tg.refusal(err)
	}
	if !e.Mode.IsRegular() {
		dir.Close()
		// A symlink (even to a file inside the root), directory, device or
		// socket is refused: the person is asked about one regular file.
		return nil, "", identity{}, confirm.Refuse("Not a regular file (it is a %s).", kind(e.Mode))
	}
	return dir, name, identity{
		dir: dir.ID(), dev: e.Dev, ino: e.Ino, size: e.Size, mtimeNs: e.MtimeNs, mode: e.Mode,
	}, nil
}

// refusal says which component of the path was refused and why, under the
// root's name.
func (tg target) refusal(err error) error {
	var be *beneath.Error
	if !errors.As(err, &be) {
		return err
	}
	shown := &beneath.Error{Path: filepath.Join(tg.root.Names()[0], be.Path), Err: be.Err}
	return confirm.Refuse("The path cannot be used: %s.", strings.TrimPrefix(shown.Error(), "beneath: "))
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

// beforeAsking says so in a refusal made before the question.
func beforeAsking(err error) error {
	var r *confirm.Refusal
	if errors.As(err, &r) {
		return confirm.Refuse("%s Nothing was asked or deleted.", r.Reason)
	}
	return err
}

func (t *Tool) locate(path string) (target, identity, error) {
	tg, err := t.resolve(path)
	if err != nil {
		return target{}, identity{}, beforeAsking(err)
	}
	dir, _, id, err := tg.open()
	if err != nil {
		return target{}, identity{}, beforeAsking(err)
	}
	dir.Close()
	return tg, id, nil
}

// shown is the path as the person sees it: under the root's resolved name.
func (tg target) shown() string { return filepath.Join(tg.root.Names()[0], tg.rel) }

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
	tg, err := t.resolve(path)
	if err != nil {
		return nil, confirm.Refuse("The file changed after it was approved: %s Nothing was deleted.", err)
	}
	// One handle from the check to the unlink: the parent is resolved once
	// more, never again, so swapping a directory on the path for a symlink
	// after this point changes nothing.
	dir, name, id, err := tg.open()
	if err != nil {
		return nil, confirm.Refuse("The file changed after it was approved: %s Nothing was deleted.", err)
	}
	defer dir.Close()
	if id.String() != c.Subject {
		// Same name, different object (or the same name in another
		// directory): replaced, rewritten, re-linked or moved after the
		// person approved. The approval was for the old one.
		return nil, confirm.Refuse("The file was replaced or modified after it was approved. Nothing was deleted.")
	}
	if t.beforeUnlink != nil {
		t.beforeUnlink()
	}
	if err := dir.Unlink(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EBUSY) {
			// Renamed away, or swapped for a directory or a mount point,
			// in the window after the check: nothing was removed.
			return nil, confirm.Refuse("The file changed just before it was deleted (%v). Nothing was deleted.", errors.Unwrap(err))
		}
		return nil, fmt.Errorf("filetool: unlink: %w", err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
		Text: fmt.Sprintf("Deleted %s.", prompt.Path(tg.shown(), prompt.Options{})),
	}}}, nil
}
