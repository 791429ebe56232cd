package audit_test

import (
	"os"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/impl/audit"
)

// BenchmarkFileAppend writes a confirmed call's first record (an Asked,
// with its question) to a File: what each audited step of the memory
// store adds, under its locks. tmpfs (/dev/shm), where a sync costs
// nothing, is the trail's own work; tempdir adds the disk's sync.
func BenchmarkFileAppend(b *testing.B) {
	r := audit.Record{Op: audit.OpIssue, ID: "0123456789abcdef0123456789abcdef", Principal: "alice", Tool: "delete_file",
		ArgsDigest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Question:   "Delete the file /srv/data/reports/2026/q3-summary.pdf (48213 bytes)? This cannot be undone.",
		Deadline:   1_780_000_000_000_000, Result: "ok"}
	for _, c := range []struct{ name, dir string }{{"tmpfs", "/dev/shm"}, {"tempdir", ""}} {
		b.Run(c.name, func(b *testing.B) {
			dir := c.dir
			if dir == "" {
				dir = b.TempDir()
			} else if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				b.Skipf("no %s", dir)
			}
			d, err := os.MkdirTemp(dir, "mcp-confirm-bench-")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(d) })
			f, err := audit.OpenFile(d+"/audit.jsonl", audit.FileOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.ReportAllocs()
			for b.Loop() {
				if err := f.Append(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
