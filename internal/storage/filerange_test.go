package storage

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/kmirror/kmirror/internal/record"
)

// appendN appends n batches of one 300-byte record each, so that smallConfig rolls a
// segment every few batches.
func appendN(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{ts: 1000, valueSize: 300}), 0)
	}
}

// checkRange reads r through its file and compares it with want.
func checkRange(t *testing.T, r FileRange, want []byte) {
	t.Helper()
	got, err := r.ReadInto(make([]byte, r.Len))
	if err != nil {
		t.Fatalf("reading the range: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("range bytes differ from what Read returned (%d vs %d bytes)", len(got), len(want))
	}
}

// TestReadRangeMatchesRead: ReadRange covers exactly the bytes Read returns, with the
// last offset of its last batch, for every offset of a multi-segment log.
func TestReadRangeMatchesRead(t *testing.T) {
	l := openT(t, t.TempDir(), smallConfig())
	defer l.Close()
	appendN(t, l, 20)
	for off := int64(0); off <= l.LogEndOffset(); off++ {
		for _, maxBytes := range []int32{1, 700, 1 << 20} {
			want, err := l.Read(off, maxBytes, l.LogEndOffset(), off%2 == 0)
			if err != nil {
				t.Fatal(err)
			}
			r, err := l.ReadRange(off, maxBytes, l.LogEndOffset(), off%2 == 0)
			if err != nil {
				t.Fatal(err)
			}
			if r.Len != int64(len(want)) {
				t.Fatalf("offset %d: range of %d bytes, Read gave %d", off, r.Len, len(want))
			}
			wantLast := int64(-1)
			if len(want) > 0 {
				wantLast = lastOffsetOf(t, want)
			}
			if r.LastOffset != wantLast {
				t.Fatalf("offset %d: LastOffset %d, want %d", off, r.LastOffset, wantLast)
			}
			checkRange(t, r, want)
			r.Release()
		}
	}
	if _, err := l.ReadRange(l.LogEndOffset()+1, 100, 1<<62, true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("ReadRange past the LEO: %v", err)
	}
}

func lastOffsetOf(t *testing.T, data []byte) int64 {
	t.Helper()
	bs := splitBatches(t, data)
	return bs[len(bs)-1].LastOffset()
}

// TestFileRangeOutlivesRetention: a segment deleted by retention while a range of it
// is outstanding stays readable through the range, and its file is closed by Release.
func TestFileRangeOutlivesRetention(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.RetentionBytes = 0 // every segment but the active one goes
	l := openT(t, dir, cfg)
	defer l.Close()
	appendN(t, l, 20)
	want, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.ReadRange(0, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	name := segmentName(0) + logSuffix
	n, err := l.ApplyRetention(2000)
	if err != nil || n == 0 {
		t.Fatalf("ApplyRetention deleted %d segments: %v", n, err)
	}
	if _, err := os.Stat(dir + "/" + name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("segment %s still on disk after retention: %v", name, err)
	}
	if l.LogStartOffset() == 0 {
		t.Fatal("log start did not move")
	}
	checkRange(t, r, want) // the unlinked file is still open
	r.Release()
	if _, err := r.File.ReadAt(make([]byte, 1), r.Pos); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after the last Release: %v, want os.ErrClosed", err)
	}
}

// TestFileRangeOutlivesDeleteAndClose: Log.Delete and Log.Close leave outstanding
// ranges readable; a range released before the segment goes does not close its file.
func TestFileRangeOutlivesDeleteAndClose(t *testing.T) {
	for _, del := range []bool{false, true} {
		l := openT(t, t.TempDir(), smallConfig())
		appendN(t, l, 10)
		want, _ := l.Read(0, 1<<20, l.LogEndOffset(), true)
		early, err := l.ReadRange(0, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		early.Release()
		checkRange(t, early, want) // the segment still holds its own reference
		r, _ := l.ReadRange(0, 1<<20, l.LogEndOffset(), true)
		if del {
			err = l.Delete()
		} else {
			err = l.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.ReadRange(0, 1<<20, 1<<62, true); !isErr(err, ErrClosed) {
			t.Fatalf("ReadRange on a closed log: %v", err)
		}
		checkRange(t, r, want)
		r.Release()
		if _, err := r.File.ReadAt(make([]byte, 1), r.Pos); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("read after the last Release: %v, want os.ErrClosed", err)
		}
	}
}

// TestFileRangeSurvivesTruncation: truncating the segment a range points into (and
// appending new batches over the cut) leaves the range's bytes as they were; the log
// reads the new batches. A file never ranged is cut in place.
func TestFileRangeSurvivesTruncation(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20 // one segment
	l := openT(t, t.TempDir(), cfg)
	defer l.Close()
	appendN(t, l, 10)
	want, _ := l.Read(0, 1<<20, l.LogEndOffset(), true)
	r, err := l.ReadRange(0, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{ts: 2000, valueSize: 301}), 0)
	}
	checkRange(t, r, want)
	if r.File == l.segs[0].log {
		t.Fatal("truncation with an outstanding range cut the file in place")
	}
	r.Release()
	if _, err := r.File.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("old file after Release: %v, want os.ErrClosed", err)
	}
	got := readAllBatches(t, l)
	if len(got) != 13 || got[3].BaseOffset() != 3 || len(got[3]) == len(splitBatches(t, want)[3]) {
		t.Fatalf("after truncation and appends: %d batches", len(got))
	}
	// A file that was ever ranged is never cut in place (sendfile may still hold its
	// pages); one that never was is.
	r2, err := l.ReadRange(0, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	r2.Release() // released, but the kernel may still hold pages it sent
	f := l.segs[0].log
	if err := l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	if l.segs[0].log == f {
		t.Fatal("truncation of a ranged file cut it in place")
	}
	if n := len(readAllBatches(t, l)); n != 5 {
		t.Fatalf("%d batches after the second truncation, want 5", n)
	}
	f = l.segs[0].log
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if l.segs[0].log != f {
		t.Fatal("truncation of a file never ranged replaced it")
	}
	if n := len(readAllBatches(t, l)); n != 4 {
		t.Fatalf("%d batches after the third truncation, want 4", n)
	}
}

// TestFileRangeOutlivesCompaction: segments replaced by the cleaner stay readable
// through outstanding ranges.
func TestFileRangeOutlivesCompaction(t *testing.T) {
	l := openT(t, t.TempDir(), compactConfig())
	defer l.Close()
	writeUpdates(t, l, 20, 100)
	want, _ := l.Read(0, 1<<20, l.LogEndOffset(), true)
	r, err := l.ReadRange(0, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Clean(10_000_000, true)
	if err != nil || !res.Cleaned || res.RecordsRemoved == 0 {
		t.Fatalf("Clean: %+v, %v", res, err)
	}
	checkRange(t, r, want)
	r.Release()
	if _, err := r.File.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("replaced file after Release: %v, want os.ErrClosed", err)
	}
}

// splitBatches splits data into its batches.
func splitBatches(t *testing.T, data []byte) []record.Batch {
	t.Helper()
	var out []record.Batch
	it := record.IterBatches(data)
	for it.Next() {
		out = append(out, it.Batch())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
