package storage

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/record"
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

// BenchmarkAppendWhileCleaning measures appends to a compacted log of about 25 MiB (100
// segments of 256 KiB, 1,000 keys each updated many times) while a forced Clean pass of
// the whole log runs: one op is one pass, and the reported append-p50-µs, append-p99-µs
// and append-max-µs are the latencies of the appends made during the passes (1 KiB
// batches back to back). Produce to a compacted partition waits for the cleaner only as
// long as an append waits for the log's append lock.
func BenchmarkAppendWhileCleaning(b *testing.B) {
	cfg := DefaultConfig()
	cfg.CleanupPolicy = "compact"
	cfg.SegmentBytes = 256 << 10
	l, err := Open(b.TempDir(), [16]byte{1}, cfg, quietLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := func(i int) record.Batch {
		return kvBatch(b, 0, int64(i), record.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]record.KV{{Key: []byte(fmt.Sprintf("key-%04d", i%1000)), Value: bytes.Repeat([]byte{byte(i)}, 1000)}})
	}
	i := 0
	for ; len(l.segs) <= 100; i++ {
		if _, err := l.AppendAsLeader(batch(i), 0, -1); err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		done := make(chan error, 1)
		go func() {
			_, err := l.Clean(time.Now().UnixMilli(), true)
			done <- err
		}()
		for running := true; running; i++ {
			select {
			case err := <-done:
				if err != nil {
					b.Fatal(err)
				}
				running = false
			default:
			}
			start := time.Now()
			if _, err := l.AppendAsLeader(batch(i), 0, -1); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	us := func(q float64) float64 { return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) }
	b.ReportMetric(us(0.5), "append-p50-µs")
	b.ReportMetric(us(0.99), "append-p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "append-max-µs")
}
