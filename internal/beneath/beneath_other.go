//go:build !linux

package beneath

import (
	"errors"
	"fmt"
)

// errUnsupported is returned by Open on systems without openat2 or an
// O_PATH walk whose guarantees this package has been checked against.
var errUnsupported = errors.New("beneath: only Linux is supported; every root is refused")

// Root is a directory opened once; on this system none can be.
type Root struct{ names []string }

// Open refuses every directory on this system.
func Open(dir string, _ Options) (*Root, error) {
	return nil, fmt.Errorf("root %s: %w", Show(dir), errUnsupported)
}

// Names returns every absolute name of the root.
func (r *Root) Names() []string { return append([]string(nil), r.names...) }

// ID returns the root directory's identity.
func (r *Root) ID() ID { return ID{} }

// Walks reports whether the root resolves by the openat walk.
func (r *Root) Walks() bool { return false }

// Check refuses.
func (r *Root) Check() error { return errUnsupported }

// Close does nothing.
func (r *Root) Close() error { return nil }

// OpenParent refuses.
func (r *Root) OpenParent(string) (*Dir, string, error) { return nil, "", errUnsupported }

// OpenDir refuses.
func (r *Root) OpenDir(string) (*Dir, error) { return nil, errUnsupported }

func (rs *Roots) same(*Root) *Root { return nil }

// Dir is an open handle on a directory beneath a root.
type Dir struct{}

// ID returns the directory's identity.
func (d *Dir) ID() ID { return ID{} }

// Lstat refuses.
func (d *Dir) Lstat(string) (Entry, error) { return Entry{}, errUnsupported }

// Unlink refuses.
func (d *Dir) Unlink(string) error { return errUnsupported }

// Close does nothing.
func (d *Dir) Close() error { return nil }
