package audit_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkDurableAppend measures, call by call in one loop, ways to make
// a 300-byte record durable in the test's temporary directory (TMPDIR
// chooses the file system): a write and an fsync at the end of the file
// (what File did before one call a record); a write and an fdatasync;
// one pwritev2 with RWF_DSYNC (what File does); and, as PostgreSQL writes
// its WAL, a pwrite into space preallocated by writing zeros (and fsync'd)
// then fdatasync, or pwritev2 with RWF_DSYNC there — an append that does
// not change the file's size, so that the sync need not commit the
// inode. It reports each one's median and its ratio to write+fsync.
func BenchmarkDurableAppend(b *testing.B) {
	dir := b.TempDir()
	rec := make([]byte, 300)
	for i := range rec {
		rec[i] = 'a' + byte(i%26)
	}
	rec[len(rec)-1] = '\n'
	open := func(name string, flags int) *os.File {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|flags, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		return f
	}
	const prealloc = 4 << 20 // zeros written up front, reused past 13,981 records
	zeroed := func(name string) *os.File {
		f := open(name, 0)
		if _, err := f.Write(make([]byte, prealloc)); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		return f
	}
	fsyncF, fdatasyncF, dsyncF := open("fsync", os.O_APPEND), open("fdatasync", os.O_APPEND), open("dsync", os.O_APPEND)
	preF, preDsyncF := zeroed("pre-fdatasync"), zeroed("pre-dsync")
	type method struct {
		name  string
		write func(i int) error
		times []time.Duration
	}
	ms := []*method{
		{name: "write+fsync", write: func(int) error {
			if _, err := fsyncF.Write(rec); err != nil {
				return err
			}
			return fsyncF.Sync()
		}},
		{name: "write+fdatasync", write: func(int) error {
			if _, err := fdatasyncF.Write(rec); err != nil {
				return err
			}
			return unix.Fdatasync(int(fdatasyncF.Fd()))
		}},
		{name: "dsync", write: func(int) error {
			_, err := unix.Pwritev2(int(dsyncF.Fd()), [][]byte{rec}, -1, unix.RWF_DSYNC)
			return err
		}},
		{name: "prealloc-fdatasync", write: func(i int) error {
			if _, err := preF.WriteAt(rec, int64(i)*int64(len(rec))%prealloc); err != nil {
				return err
			}
			return unix.Fdatasync(int(preF.Fd()))
		}},
		{name: "prealloc-dsync", write: func(i int) error {
			_, err := unix.Pwritev2(int(preDsyncF.Fd()), [][]byte{rec}, int64(i)*int64(len(rec))%prealloc, unix.RWF_DSYNC)
			return err
		}},
	}
	for k := 0; b.Loop(); k++ {
		for j := range ms {
			m := ms[(k+j)%len(ms)]
			t0 := time.Now()
			if err := m.write(k); err != nil {
				b.Fatal(err)
			}
			m.times = append(m.times, time.Since(t0))
		}
	}
	var base float64
	for i, m := range ms {
		slices.Sort(m.times)
		med := float64(m.times[len(m.times)/2])
		if i == 0 {
			base = med
		}
		b.ReportMetric(med, m.name+"-ns")
		if i > 0 {
			b.ReportMetric(med/base, m.name+"/fsync")
		}
	}
}
