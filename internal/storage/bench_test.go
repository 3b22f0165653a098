package storage

import (
	"path/filepath"
	"testing"
)

// benchLog fills a log of segments segments of about 256 KiB, each of 1 KiB batches from
// 64 idempotent producers (the shape that makes producer-state rebuilding cost: every
// batch carries a producer ID), and closes its Manager cleanly. It returns the log
// directory's parent.
func benchLog(b *testing.B, segments int) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "data")
	m, err := OpenManager(dir, quietLogger())
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 256 << 10
	l, err := m.Open("bench", 0, [16]byte{1}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	seqs := make([]int32, 64)
	for i := 0; len(l.segs) <= segments; i++ {
		pid := int64(1000 + i%64)
		bt := mkBatch(b, batchOpts{pid: pid, seq: seqs[pid-1000], n: 4, valueSize: 230, ts: int64(i)})
		seqs[pid-1000] += 4
		if _, err := l.AppendAsLeader(bt, 1, -1); err != nil {
			b.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkOpenAfterCleanShutdown opens a log of 200 segments (about 50 MiB, 51,000
// batches) after a clean shutdown, as a broker restart does.
func BenchmarkOpenAfterCleanShutdown(b *testing.B) {
	dir := benchLog(b, 200)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 256 << 10
	b.ResetTimer()
	for range b.N {
		m, err := OpenManager(dir, quietLogger())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Open("bench", 0, [16]byte{1}, cfg); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkTruncateLastBatch truncates the last batch of a log of 200 segments and
// appends it again, as a follower truncating to its high watermark does.
func BenchmarkTruncateLastBatch(b *testing.B) {
	dir := benchLog(b, 200)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 256 << 10
	m, err := OpenManager(dir, quietLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	l, err := m.Open("bench", 0, [16]byte{1}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	last := readAllBatches(b, l)
	tail := append([]byte(nil), last[len(last)-1]...)
	b.ResetTimer()
	for range b.N {
		if err := l.TruncateTo(l.LogEndOffset() - 1); err != nil {
			b.Fatal(err)
		}
		if _, err := l.AppendAsFollower(tail); err != nil {
			b.Fatal(err)
		}
	}
}
