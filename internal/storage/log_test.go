package storage

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/record"
)

func segmentFiles(t *testing.T, dir, suffix string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*"+suffix))
	sort.Strings(m)
	return m
}

func TestAppendReadAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, smallConfig())
	var want [][]byte
	for i := 0; i < 200; i++ {
		b := mkBatch(t, batchOpts{n: 1 + i%4, ts: int64(1000 + i), valueSize: 20})
		info := mustAppend(t, l, b, 3)
		if info.FirstOffset != b.BaseOffset() || info.LastOffset != b.LastOffset() {
			t.Fatalf("info %+v for batch %d..%d", info, b.BaseOffset(), b.LastOffset())
		}
		want = append(want, append([]byte(nil), b...))
	}
	if n := len(segmentFiles(t, dir, ".log")); n < 5 {
		t.Fatalf("expected many segments, got %d", n)
	}
	check := func(l *Log) {
		t.Helper()
		got := readAllBatches(t, l)
		if len(got) != len(want) {
			t.Fatalf("read %d batches, want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("batch %d differs", i)
			}
		}
		// Every offset finds the batch that contains it.
		for _, w := range want {
			b := record.Batch(w)
			for o := b.BaseOffset(); o <= b.LastOffset(); o++ {
				data, err := l.Read(o, 1, 1<<62, true)
				if err != nil || !bytes.Equal(data, w) {
					t.Fatalf("Read(%d, minOne) = %d bytes, %v", o, len(data), err)
				}
			}
		}
		if _, err := l.Read(l.LogEndOffset()+1, 100, 1<<62, true); !isErr(err, ErrOffsetOutOfRange) {
			t.Fatalf("read past LEO: %v", err)
		}
		if data, err := l.Read(l.LogEndOffset(), 100, 1<<62, true); err != nil || len(data) != 0 {
			t.Fatalf("read at LEO: %d bytes, %v", len(data), err)
		}
	}
	check(l)
	leo, size := l.LogEndOffset(), l.Size()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, smallConfig())
	defer l.Close()
	if l.LogEndOffset() != leo || l.Size() != size {
		t.Fatalf("after reopen LEO %d size %d, want %d %d", l.LogEndOffset(), l.Size(), leo, size)
	}
	check(l)
	for _, name := range segmentFiles(t, dir, ".log") {
		if len(strings.TrimSuffix(filepath.Base(name), ".log")) != 20 {
			t.Fatalf("segment name %s", name)
		}
	}
}

func TestReadLimits(t *testing.T) {
	l := openT(t, t.TempDir(), DefaultConfig())
	defer l.Close()
	var sizes []int
	for i := 0; i < 5; i++ {
		b := mkBatch(t, batchOpts{n: 2, valueSize: 100})
		sizes = append(sizes, len(b))
		mustAppend(t, l, b, 0)
	}
	// maxBytes fits two batches.
	data, _ := l.Read(0, int32(sizes[0]+sizes[1]+10), 1<<62, false)
	if len(data) != sizes[0]+sizes[1] {
		t.Fatalf("got %d bytes", len(data))
	}
	// Too small without minOneBatch: nothing; with it: one whole batch.
	if data, _ = l.Read(0, 10, 1<<62, false); len(data) != 0 {
		t.Fatalf("got %d bytes", len(data))
	}
	if data, _ = l.Read(0, 10, 1<<62, true); len(data) != sizes[0] {
		t.Fatalf("got %d bytes", len(data))
	}
	// maxOffset (HW) excludes batches starting at or after it.
	if data, _ = l.Read(0, 1<<20, 4, true); len(data) != sizes[0]+sizes[1] {
		t.Fatalf("HW 4: got %d bytes", len(data))
	}
	if data, _ = l.Read(4, 1<<20, 4, true); len(data) != 0 {
		t.Fatalf("at HW: got %d bytes", len(data))
	}
}

// TestIndexFiles checks the on-disk .index/.timeindex entries the way kafka-dump-log
// does: each offset entry points at the batch holding that offset, time entries grow.
func TestIndexFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.IndexIntervalBytes = 64
	l := openT(t, dir, cfg)
	for i := 0; i < 100; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 2, ts: int64(i * 10), valueSize: 30}), 0)
	}
	l.Close()
	logData, _ := os.ReadFile(filepath.Join(dir, segmentName(0)+".log"))
	idx, _ := os.ReadFile(filepath.Join(dir, segmentName(0)+".index"))
	tidx, _ := os.ReadFile(filepath.Join(dir, segmentName(0)+".timeindex"))
	if len(idx) == 0 || len(idx)%8 != 0 || len(tidx) == 0 || len(tidx)%12 != 0 {
		t.Fatalf("index sizes %d %d", len(idx), len(tidx))
	}
	for i := 0; i < len(idx); i += 8 {
		rel := int32(binary.BigEndian.Uint32(idx[i:]))
		pos := int32(binary.BigEndian.Uint32(idx[i+4:]))
		b, _, err := record.Next(logData[pos:])
		if err != nil || b.LastOffset() != int64(rel) {
			t.Fatalf("index entry %d/%d points at batch ending %d (%v)", rel, pos, b.LastOffset(), err)
		}
	}
	prev := int64(-1)
	for i := 0; i < len(tidx); i += 12 {
		ts := int64(binary.BigEndian.Uint64(tidx[i:]))
		if ts <= prev {
			t.Fatalf("time index not increasing")
		}
		prev = ts
	}
	if prev != 99*10 {
		t.Fatalf("last time index entry %d, want 990 (final entry on close of an inactive segment is optional)", prev)
	}
}

func TestOffsetForTimestampCompressed(t *testing.T) {
	for _, codec := range []int8{0, 1, 4} {
		l := openT(t, t.TempDir(), smallConfig())
		// 30 batches of 10 records, timestamps 1000, 1002, ... (step 2 per record).
		for i := 0; i < 30; i++ {
			mustAppend(t, l, mkBatch(t, batchOpts{n: 10, ts: int64(1000 + 20*i), tsStep: 2, codec: codec, valueSize: 50}), 0)
		}
		for _, c := range []struct{ ts, off, got int64 }{
			{0, 0, 1000}, {1000, 0, 1000}, {1001, 1, 1002}, {1013, 7, 1014},
			{1100, 50, 1100}, {1101, 51, 1102}, {1598, 299, 1598},
		} {
			off, ts, found, err := l.OffsetForTimestamp(c.ts)
			if err != nil || !found || off != c.off || ts != c.got {
				t.Fatalf("codec %d ts %d: got %d %d %v %v, want %d %d", codec, c.ts, off, ts, found, err, c.off, c.got)
			}
		}
		if _, _, found, err := l.OffsetForTimestamp(1599); found || err != nil {
			t.Fatalf("past last record: found=%v err=%v", found, err)
		}
		if off, ts := l.MaxTimestamp(); off != 299 || ts != 1598 {
			t.Fatalf("MaxTimestamp = %d %d", off, ts)
		}
		l.Close()
	}
	l := openT(t, t.TempDir(), DefaultConfig())
	defer l.Close()
	if off, ts := l.MaxTimestamp(); off != -1 || ts != -1 {
		t.Fatalf("empty MaxTimestamp = %d %d", off, ts)
	}
	// LogAppendTime: every record has the batch's max timestamp.
	b := mkBatch(t, batchOpts{n: 3, ts: 5})
	if _, err := l.AppendAsLeader(b, 0, 777); err != nil {
		t.Fatal(err)
	}
	if off, ts, found, _ := l.OffsetForTimestamp(700); !found || off != 0 || ts != 777 {
		t.Fatalf("LogAppendTime lookup: %d %d %v", off, ts, found)
	}
	if b.Check() != nil || !b.LogAppendTime() || b.MaxTimestamp() != 777 {
		t.Fatalf("LogAppendTime not stamped")
	}
}

func TestRoll(t *testing.T) {
	t.Run("size", func(t *testing.T) {
		dir := t.TempDir()
		cfg := DefaultConfig()
		b := mkBatch(t, batchOpts{valueSize: 100})
		cfg.SegmentBytes = int64(3 * len(b))
		l := openT(t, dir, cfg)
		defer l.Close()
		for i := 0; i < 7; i++ {
			mustAppend(t, l, mkBatch(t, batchOpts{valueSize: 100}), 0)
		}
		got := segmentFiles(t, dir, ".log")
		if len(got) != 3 || !strings.HasSuffix(got[1], segmentName(3)+".log") || !strings.HasSuffix(got[2], segmentName(6)+".log") {
			t.Fatalf("segments %v", got)
		}
	})
	t.Run("time", func(t *testing.T) {
		dir := t.TempDir()
		cfg := DefaultConfig()
		cfg.SegmentMs = 1000
		l := openT(t, dir, cfg)
		defer l.Close()
		for _, ts := range []int64{10_000, 10_500, 11_000, 11_001, 11_500, 12_500} {
			mustAppend(t, l, mkBatch(t, batchOpts{ts: ts}), 0)
		}
		// rolls before 11_001 (1001 ms after 10_000) and before 12_500 (1499 after 11_001).
		if got := segmentFiles(t, dir, ".log"); len(got) != 3 || !strings.HasSuffix(got[1], segmentName(3)+".log") {
			t.Fatalf("segments %v", got)
		}
	})
	t.Run("offsetGap", func(t *testing.T) {
		dir := t.TempDir()
		l := openT(t, dir, DefaultConfig())
		big := int64(1)<<31 + 5
		var buf []byte
		buf = append(buf, mkBatch(t, batchOpts{base: 0, n: 2})...)
		buf = append(buf, mkBatch(t, batchOpts{base: 10})...)
		buf = append(buf, mkBatch(t, batchOpts{base: big})...)
		buf = append(buf, mkBatch(t, batchOpts{base: big + 1})...)
		if _, err := l.AppendAsFollower(buf); err != nil {
			t.Fatal(err)
		}
		got := segmentFiles(t, dir, ".log")
		if len(got) != 2 || !strings.HasSuffix(got[1], segmentName(big)+".log") {
			t.Fatalf("segments %v", got)
		}
		if l.LogEndOffset() != big+2 {
			t.Fatalf("LEO %d", l.LogEndOffset())
		}
		l.Close()
		l = openT(t, dir, DefaultConfig())
		defer l.Close()
		if n := len(readAllBatches(t, l)); n != 4 || l.LogEndOffset() != big+2 {
			t.Fatalf("after reopen %d batches, LEO %d", n, l.LogEndOffset())
		}
		data, err := l.Read(11, 1<<20, 1<<62, true)
		if err != nil || record.Batch(data).BaseOffset() != big {
			t.Fatalf("read in gap: %v", err)
		}
	})
	t.Run("indexFull", func(t *testing.T) {
		dir := t.TempDir()
		cfg := DefaultConfig()
		cfg.IndexIntervalBytes = 1
		cfg.SegmentIndexBytes = 48 // 6 offset entries, 4 time entries
		l := openT(t, dir, cfg)
		defer l.Close()
		for i := 0; i < 30; i++ {
			mustAppend(t, l, mkBatch(t, batchOpts{ts: int64(i)}), 0)
		}
		if got := segmentFiles(t, dir, ".log"); len(got) < 4 {
			t.Fatalf("segments %v", got)
		}
	})
}

func TestRetention(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	b := mkBatch(t, batchOpts{valueSize: 100})
	cfg.SegmentBytes = int64(2 * len(b))
	cfg.RetentionMs = 1000
	l := openT(t, dir, cfg)
	defer l.Close()
	for i := 0; i < 10; i++ { // 5 segments, timestamps 0..9000
		mustAppend(t, l, mkBatch(t, batchOpts{valueSize: 100, ts: int64(i * 1000)}), int32(i))
	}
	if n, err := l.ApplyRetention(4500); err != nil || n != 2 {
		// segments with max ts 1000 and 3000 are older than 1000 ms at 4500.
		t.Fatalf("ApplyRetention = %d, %v", n, err)
	}
	if l.LogStartOffset() != 4 {
		t.Fatalf("log start %d", l.LogStartOffset())
	}
	if _, err := l.Read(3, 100, 1<<62, true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	if e := l.EpochEntries(); e[0] != (EpochEntry{4, 4}) {
		t.Fatalf("epoch cache not truncated from start: %v", e)
	}
	// Never deletes the active segment.
	if n, _ := l.ApplyRetention(1 << 40); n != 2 || l.LogStartOffset() != 8 {
		t.Fatalf("got %d, log start %d", n, l.LogStartOffset())
	}
	l.SetConfig(Config{RetentionMs: -1, RetentionBytes: 0, SegmentBytes: cfg.SegmentBytes})
	if n, _ := l.ApplyRetention(0); n != 0 {
		t.Fatalf("active segment deleted")
	}
	// retention.bytes
	for i := 0; i < 6; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{valueSize: 100}), 20)
	}
	l.SetConfig(Config{RetentionMs: -1, RetentionBytes: int64(4 * len(b)), SegmentBytes: cfg.SegmentBytes})
	if n, _ := l.ApplyRetention(0); n != 2 || l.Size() != int64(4*len(b)) {
		t.Fatalf("retention.bytes deleted %d, size %d", n, l.Size())
	}
}

func TestTruncate(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, smallConfig())
	for i := 0; i < 50; i++ { // 50 batches of 3 records; epoch changes every 10 batches
		mustAppend(t, l, mkBatch(t, batchOpts{n: 3, ts: int64(i), valueSize: 40, pid: 7, seq: int32(3 * i)}), int32(i/10))
	}
	// No-op at or past LEO.
	if err := l.TruncateTo(500); err != nil || l.LogEndOffset() != 150 {
		t.Fatalf("no-op truncate: %v LEO %d", err, l.LogEndOffset())
	}
	// Inside a batch: the straddling batch goes whole.
	if err := l.TruncateTo(100); err != nil || l.LogEndOffset() != 99 {
		t.Fatalf("truncate: %v LEO %d", err, l.LogEndOffset())
	}
	if e := l.EpochEntries(); len(e) != 4 || e[3] != (EpochEntry{3, 90}) {
		t.Fatalf("epochs %v", e)
	}
	if got := readAllBatches(t, l); got[len(got)-1].NextOffset() != 99 {
		t.Fatalf("last batch ends at %d", got[len(got)-1].LastOffset())
	}
	// Producer state rebuilt: the next sequence after 33 batches is 99.
	if _, err := l.AppendAsLeader(mkBatch(t, batchOpts{pid: 7, seq: 150}), 3, -1); !isErr(err, ErrOutOfOrderSequence) {
		t.Fatalf("expected out of order after truncation, got %v", err)
	}
	mustAppend(t, l, mkBatch(t, batchOpts{pid: 7, seq: 99}), 5)
	// At a segment base offset and across restart.
	if err := l.TruncateTo(30); err != nil || l.LogEndOffset() != 30 {
		t.Fatalf("truncate: %v LEO %d", err, l.LogEndOffset())
	}
	l.Close()
	l = openT(t, dir, smallConfig())
	if l.LogEndOffset() != 30 || len(readAllBatches(t, l)) != 10 {
		t.Fatalf("after reopen LEO %d", l.LogEndOffset())
	}
	if e := l.EpochEntries(); len(e) != 1 || e[0] != (EpochEntry{0, 0}) {
		t.Fatalf("epochs %v", e)
	}
	// Truncate to 0 keeps an empty first segment.
	if err := l.TruncateTo(0); err != nil || l.LogEndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("truncate to 0: %v LEO %d", err, l.LogEndOffset())
	}
	mustAppend(t, l, mkBatch(t, batchOpts{}), 9)
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || len(l.EpochEntries()) != 0 {
		t.Fatalf("after full truncation: %d %d %v", l.LogStartOffset(), l.LogEndOffset(), l.EpochEntries())
	}
	if info := mustAppend(t, l, mkBatch(t, batchOpts{n: 2}), 10); info.FirstOffset != 1000 {
		t.Fatalf("append after full truncation at %d", info.FirstOffset)
	}
	l.Close()
	l = openT(t, dir, smallConfig())
	defer l.Close()
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1002 {
		t.Fatalf("after reopen: %d %d", l.LogStartOffset(), l.LogEndOffset())
	}
	if got := segmentFiles(t, dir, ".log"); len(got) != 1 || !strings.HasSuffix(got[0], segmentName(1000)+".log") {
		t.Fatalf("segments %v", got)
	}
}

func TestAdvanceLogStartOffset(t *testing.T) {
	l := openT(t, t.TempDir(), smallConfig())
	defer l.Close()
	for i := 0; i < 40; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 2, valueSize: 50}), int32(i/10))
	}
	if err := l.AdvanceLogStartOffset(81); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("past LEO: %v", err)
	}
	before := l.Size()
	if err := l.AdvanceLogStartOffset(45); err != nil || l.LogStartOffset() != 45 || l.Size() >= before {
		t.Fatalf("advance: %v start %d", err, l.LogStartOffset())
	}
	if err := l.AdvanceLogStartOffset(10); err != nil || l.LogStartOffset() != 45 {
		t.Fatalf("lower start accepted")
	}
	if e := l.EpochEntries(); e[0] != (EpochEntry{2, 45}) {
		t.Fatalf("epochs %v", e)
	}
	if _, err := l.Read(44, 100, 1<<62, true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	if data, err := l.Read(45, 100, 1<<62, true); err != nil || record.Batch(data).LastOffset() != 45 {
		t.Fatalf("read at start: %v", err)
	}
}

func TestFollowerAppend(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, smallConfig())
	var buf []byte
	for _, base := range []int64{0, 5, 7, 100} {
		buf = append(buf, mkBatch(t, batchOpts{base: base, n: 2, epoch: int32(base / 5), ts: base})...)
	}
	info, err := l.AppendAsFollower(buf)
	if err != nil || info.FirstOffset != 0 || info.LastOffset != 101 || l.LogEndOffset() != 102 {
		t.Fatalf("append: %+v %v", info, err)
	}
	if e := l.EpochEntries(); len(e) != 3 || e[1] != (EpochEntry{1, 5}) || e[2] != (EpochEntry{20, 100}) {
		t.Fatalf("epochs %v", e)
	}
	// The bytes are kept.
	data, _ := l.Read(0, 1<<20, 1<<62, true)
	if !bytes.Equal(data, buf) {
		t.Fatalf("follower bytes changed")
	}
	if data, _ := l.Read(50, 1<<20, 1<<62, true); record.Batch(data).BaseOffset() != 100 {
		t.Fatalf("read in gap")
	}
	// Below LEO.
	if _, err := l.AppendAsFollower(mkBatch(t, batchOpts{base: 101})); !isErr(err, ErrInvalidOffset) {
		t.Fatalf("below LEO: %v", err)
	}
	// Not increasing inside one append.
	bad := append(append([]byte(nil), mkBatch(t, batchOpts{base: 200, n: 3})...), mkBatch(t, batchOpts{base: 201})...)
	if _, err := l.AppendAsFollower(bad); !isErr(err, ErrInvalidOffset) {
		t.Fatalf("overlap: %v", err)
	}
	// CRC.
	c := mkBatch(t, batchOpts{base: 300})
	c[len(c)-1] ^= 1
	if _, err := l.AppendAsFollower(c); !isErr(err, ErrCorrupt) || !isErr(err, record.ErrCRC) {
		t.Fatalf("crc: %v", err)
	}
	// Partial batch.
	p := mkBatch(t, batchOpts{base: 300})
	if _, err := l.AppendAsFollower(p[:len(p)-3]); !isErr(err, ErrCorrupt) {
		t.Fatalf("partial: %v", err)
	}
	// The verified variant still checks framing and offsets, not the CRC.
	if _, err := l.AppendAsFollowerVerified(p[:len(p)-3]); !isErr(err, ErrCorrupt) {
		t.Fatalf("verified partial: %v", err)
	}
	if _, err := l.AppendAsFollowerVerified(mkBatch(t, batchOpts{base: 101})); !isErr(err, ErrInvalidOffset) {
		t.Fatalf("verified below LEO: %v", err)
	}
	if l.LogEndOffset() != 102 {
		t.Fatalf("failed appends moved the LEO")
	}
	if info, err := l.AppendAsFollowerVerified(mkBatch(t, batchOpts{base: 102, n: 2})); err != nil || info.LastOffset != 103 {
		t.Fatalf("verified append: %+v %v", info, err)
	}
	// A leader append after a follower gap continues at the LEO.
	if info := mustAppend(t, l, mkBatch(t, batchOpts{}), 21); info.FirstOffset != 104 {
		t.Fatalf("leader append at %d", info.FirstOffset)
	}
	l.Close()
}

func TestIdempotence(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, smallConfig())
	const pid = 42
	first := mustAppend(t, l, mkBatch(t, batchOpts{pid: pid, seq: 0, n: 3}), 0)
	mustAppend(t, l, mkBatch(t, batchOpts{n: 2}), 0) // someone else
	second := mustAppend(t, l, mkBatch(t, batchOpts{pid: pid, seq: 3, n: 2}), 0)
	leo := l.LogEndOffset()
	for _, c := range []struct {
		seq  int32
		n    int
		want AppendInfo
	}{{0, 3, first}, {3, 2, second}} {
		info, err := l.AppendAsLeader(mkBatch(t, batchOpts{pid: pid, seq: c.seq, n: c.n}), 0, -1)
		if err != nil || !info.Duplicate || info.FirstOffset != c.want.FirstOffset || info.LastOffset != c.want.LastOffset {
			t.Fatalf("duplicate seq %d: %+v %v", c.seq, info, err)
		}
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("duplicate appended")
	}
	if _, err := l.AppendAsLeader(mkBatch(t, batchOpts{pid: pid, seq: 7}), 0, -1); !isErr(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	// Unknown producer: any sequence.
	mustAppend(t, l, mkBatch(t, batchOpts{pid: 43, seq: 1000}), 0)
	// New epoch must start at 0.
	if _, err := l.AppendAsLeader(mkBatch(t, batchOpts{pid: pid, pepoch: 1, seq: 5}), 0, -1); !isErr(err, ErrOutOfOrderSequence) {
		t.Fatalf("new epoch at 5: %v", err)
	}
	mustAppend(t, l, mkBatch(t, batchOpts{pid: pid, pepoch: 1, seq: 0}), 0)
	// Fenced epoch.
	if _, err := l.AppendAsLeader(mkBatch(t, batchOpts{pid: pid, pepoch: 0, seq: 5}), 0, -1); !isErr(err, ErrInvalidProducerEpoch) {
		t.Fatalf("fenced: %v", err)
	}
	// Only the last 5 batches are remembered.
	for s := int32(1); s <= 6; s++ {
		mustAppend(t, l, mkBatch(t, batchOpts{pid: pid, pepoch: 1, seq: s}), 0)
	}
	if _, err := l.AppendAsLeader(mkBatch(t, batchOpts{pid: pid, pepoch: 1, seq: 1}), 0, -1); !isErr(err, ErrOutOfOrderSequence) {
		t.Fatalf("old batch: %v", err)
	}
	dup, err := l.AppendAsLeader(mkBatch(t, batchOpts{pid: pid, pepoch: 1, seq: 2}), 0, -1)
	if err != nil || !dup.Duplicate {
		t.Fatalf("dup of 5th last: %+v %v", dup, err)
	}
	// State survives a restart (rebuilt from the log).
	l.Close()
	l = openT(t, dir, smallConfig())
	dup2, err := l.AppendAsLeader(mkBatch(t, batchOpts{pid: pid, pepoch: 1, seq: 2}), 0, -1)
	if err != nil || !dup2.Duplicate || dup2.FirstOffset != dup.FirstOffset {
		t.Fatalf("dup after reopen: %+v %v", dup2, err)
	}
	pe := l.ProducerEntries()
	if len(pe) != 2 || pe[0].ProducerID != pid || pe[0].ProducerEpoch != 1 || pe[0].LastSequence != 6 {
		t.Fatalf("producer entries %+v", pe)
	}
	// MIRROR_PID_RESET drops the state: the same pid/seq is a new batch (spec §16).
	if _, err := l.AppendControlAsLeader(record.BuildMirrorPIDReset("src", 0, 1), 1); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		info, err := l.AppendAsLeader(mkBatch(t, batchOpts{pid: pid, pepoch: 1, seq: 2}), 1, -1)
		if err != nil || info.Duplicate {
			t.Fatalf("after reset: %+v %v", info, err)
		}
	}
	if len(l.ProducerEntries()) != 0 {
		t.Fatalf("entries survive reset")
	}
	check()
	l.Close()
	// Recovery applies the reset identically.
	l = openT(t, dir, smallConfig())
	defer l.Close()
	if pe := l.ProducerEntries(); len(pe) != 1 || pe[0].LastSequence != 2 {
		t.Fatalf("after recovery %+v", pe)
	}
}

func TestAbortedTransactionsAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, smallConfig())
	// pid 1 opens a txn at 0; pid 2 opens at 10 and commits; lots of data in between
	// (several segments); pid 1 aborts much later.
	mustAppend(t, l, mkBatch(t, batchOpts{pid: 1, seq: 0, txn: true, n: 10, valueSize: 50}), 0)
	mustAppend(t, l, mkBatch(t, batchOpts{pid: 2, seq: 0, txn: true, n: 5}), 0)
	if f, ok := l.FirstUnstableOffset(); !ok || f != 0 {
		t.Fatalf("FirstUnstableOffset %d %v", f, ok)
	}
	if hw, lso := l.HighWatermarkAndLSO(); hw != 15 || lso != 0 {
		t.Fatalf("HighWatermarkAndLSO = %d %d, want 15 0", hw, lso)
	}
	for i := 0; i < 30; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 2, valueSize: 100}), 0)
	}
	commit := mustAppend(t, l, record.BuildEndTxnMarker(record.ControlCommit, 2, 0, 0, 0, 0), 0)
	mustAppend(t, l, mkBatch(t, batchOpts{pid: 1, seq: 10, txn: true, n: 2}), 0)
	for i := 0; i < 30; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 2, valueSize: 100}), 0)
	}
	abort, err := l.AppendControlAsLeader(record.BuildEndTxnMarker(record.ControlAbort, 1, 0, 0, 0, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.FirstUnstableOffset(); ok || len(l.OpenTransactions()) != 0 {
		t.Fatalf("transactions still open")
	}
	if hw, lso := l.HighWatermarkAndLSO(); hw != l.LogEndOffset() || lso != hw {
		t.Fatalf("HighWatermarkAndLSO = %d %d with no open transaction, LEO %d", hw, lso, l.LogEndOffset())
	}
	if len(segmentFiles(t, dir, ".log")) < 3 {
		t.Fatalf("want several segments")
	}
	want := AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: abort.FirstOffset, LastStableOffset: abort.FirstOffset + 1}
	check := func(l *Log) {
		t.Helper()
		for _, r := range [][2]int64{{0, 1}, {5, 20}, {commit.FirstOffset, commit.FirstOffset + 3}, {abort.FirstOffset, abort.FirstOffset + 1}} {
			got := l.AbortedTransactions(r[0], r[1])
			if len(got) != 1 || got[0] != want {
				t.Fatalf("AbortedTransactions(%v) = %+v", r, got)
			}
		}
		if got := l.AbortedTransactions(abort.FirstOffset+1, abort.FirstOffset+10); len(got) != 0 {
			t.Fatalf("after marker: %+v", got)
		}
	}
	check(l)
	// Open transaction across restart and the txnindex file.
	mustAppend(t, l, mkBatch(t, batchOpts{pid: 3, seq: 0, txn: true}), 0)
	l.Close()
	l = openT(t, dir, smallConfig())
	defer l.Close()
	check(l)
	if o := l.OpenTransactions(); len(o) != 1 || o[0].ProducerID != 3 || o[0].FirstOffset != abort.FirstOffset+1 {
		t.Fatalf("open txns %+v", o)
	}
	if f, ok := l.FirstUnstableOffset(); !ok || f != abort.FirstOffset+1 {
		t.Fatalf("FirstUnstableOffset %d", f)
	}
	var n int
	for _, f := range segmentFiles(t, dir, ".txnindex") {
		st, _ := os.Stat(f)
		n += int(st.Size())
	}
	if n != 34 {
		t.Fatalf("txnindex bytes %d, want one 34-byte entry", n)
	}
	// Truncating away the marker reopens the transaction.
	if err := l.TruncateTo(abort.FirstOffset); err != nil {
		t.Fatal(err)
	}
	if f, _ := l.FirstUnstableOffset(); f != 0 || len(l.AbortedTransactions(0, 1<<40)) != 0 {
		t.Fatalf("after truncation: fuo %d aborted %v", f, l.AbortedTransactions(0, 1<<40))
	}
}

func TestChanged(t *testing.T) {
	l := openT(t, t.TempDir(), DefaultConfig())
	defer l.Close()
	ch := l.Changed()
	select {
	case <-ch:
		t.Fatal("closed before append")
	default:
	}
	done := make(chan struct{})
	go func() { <-ch; close(done) }()
	mustAppend(t, l, mkBatch(t, batchOpts{}), 0)
	<-done
}

// TestConcurrentReads runs readers against an appender (meaningful under -race).
func TestConcurrentReads(t *testing.T) {
	l := openT(t, t.TempDir(), smallConfig())
	defer l.Close()
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for {
			select {
			case <-stop:
				return
			default:
			}
			leo := l.LogEndOffset()
			for off := int64(0); off < leo; {
				data, err := l.Read(off, 4096, leo, true)
				if isErr(err, ErrOffsetOutOfRange) || (err == nil && len(data) == 0) {
					break // a truncation moved the LEO below off
				}
				if err != nil {
					errc <- err
					return
				}
				for len(data) > 0 {
					b, rest, err := record.Next(data)
					if err != nil || b.Check() != nil {
						errc <- err
						return
					}
					off, data = b.NextOffset(), rest
				}
			}
			l.AbortedTransactions(0, leo)
			l.FirstUnstableOffset()
		}
	}()
	for i := 0; i < 300; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 2, valueSize: 30}), int32(i/50))
		if i == 150 {
			if err := l.TruncateTo(100); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
