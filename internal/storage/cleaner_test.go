package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kmirror/kmirror/internal/record"
)

// kvBatch builds a batch of keyed records (nil value = tombstone), compressed with
// codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func kvBatch(t testing.TB, codec int8, ts int64, h record.BatchHeader, recs []record.KV) record.Batch {
	t.Helper()
	h.Timestamp = ts
	b := record.Build(h, recs)
	if codec == 0 {
		return b
	}
	comp, err := compressorFor(codec)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	out, _ := comp.Compress(&buf, b.Records())
	nb := make(record.Batch, record.HeaderSize+len(out))
	copy(nb, b[:record.HeaderSize])
	copy(nb[record.HeaderSize:], out)
	binary.BigEndian.PutUint32(nb[hdrLength:], uint32(len(nb)-record.LogOverhead))
	binary.BigEndian.PutUint16(nb[hdrAttributes:], uint16(b.Attributes()|int16(codec)))
	nb.UpdateCRC()
	return nb
}

type logRecord struct {
	key, value []byte
}

// readRecords returns every record of l by offset.
func readRecords(t testing.TB, l *Log) map[int64]logRecord {
	t.Helper()
	out := map[int64]logRecord{}
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		data, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(data) == 0 {
			break
		}
		bi := record.IterBatches(data)
		for bi.Next() {
			b := bi.Batch()
			if err := b.Check(); err != nil {
				t.Fatalf("batch at %d: %v", b.BaseOffset(), err)
			}
			ri := record.IterRecords(b)
			for ri.Next() {
				r := ri.Record()
				out[r.Offset] = logRecord{append([]byte(nil), r.Key...), append([]byte(nil), r.Value...)}
				if r.Value == nil {
					out[r.Offset] = logRecord{key: out[r.Offset].key}
				}
			}
			if err := ri.Err(); err != nil {
				t.Fatal(err)
			}
			off = b.NextOffset()
		}
		if err := bi.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func compactConfig() Config {
	c := DefaultConfig()
	c.CleanupPolicy = "compact"
	c.SegmentBytes = 32 << 10
	c.DeleteRetentionMs = 1000
	return c
}

// writeUpdates appends keys × updates records in batches of 10 (codecs rotating); every
// tenth key ends with a tombstone at nine tenths of the updates. It returns what was written at each
// offset.
func writeUpdates(t testing.TB, l *Log, keys, updates int) map[int64]logRecord {
	t.Helper()
	written := map[int64]logRecord{}
	var batch []record.KV
	n := 0
	flush := func() {
		if len(batch) == 0 {
			return
		}
		b := kvBatch(t, int8(n%5), 1_000_000+int64(n), record.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, batch)
		info, err := l.AppendAsLeader(b, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range batch {
			written[info.FirstOffset+int64(i)] = logRecord{r.Key, r.Value}
		}
		batch = batch[:0]
		n++
	}
	for u := range updates {
		for k := range keys {
			r := record.KV{Key: fmt.Appendf(nil, "key-%03d", k), Value: fmt.Appendf(nil, "value-%d-%d", k, u)}
			if k%10 == 0 && u > updates*9/10 {
				continue
			}
			if k%10 == 0 && u == updates*9/10 {
				r.Value = nil
			}
			batch = append(batch, r)
			if len(batch) == 10 {
				flush()
			}
		}
	}
	flush()
	return written
}

// checkCompacted checks the log against what was written: every record read is the one
// written at its offset; below end each key appears once, at its latest offset below
// end; every key's latest record overall is present unless it is a tombstone and
// tombstonesGone; records from end on are untouched.
func checkCompacted(t *testing.T, l *Log, written map[int64]logRecord, end int64, tombstonesGone bool) {
	t.Helper()
	got := readRecords(t, l)
	latest := map[string]int64{}
	latestBelow := map[string]int64{}
	for o, r := range written {
		if o > latest[string(r.key)] || latest[string(r.key)] == 0 {
			latest[string(r.key)] = max(latest[string(r.key)], o)
		}
		if o < end {
			latestBelow[string(r.key)] = max(latestBelow[string(r.key)], o)
		}
	}
	for o, r := range got {
		w, ok := written[o]
		if !ok || !bytes.Equal(w.key, r.key) || !bytes.Equal(w.value, r.value) || (w.value == nil) != (r.value == nil) {
			t.Fatalf("offset %d: read %q=%q, written %q=%q", o, r.key, r.value, w.key, w.value)
		}
		if o < end && latestBelow[string(r.key)] != o {
			t.Fatalf("offset %d: key %q kept below end %d, latest there is %d", o, r.key, end, latestBelow[string(r.key)])
		}
		if o < end && r.value == nil && tombstonesGone {
			t.Fatalf("offset %d: tombstone for %q survived its delete horizon", o, r.key)
		}
	}
	for o := end; o < l.LogEndOffset(); o++ {
		if _, ok := got[o]; !ok {
			t.Fatalf("offset %d at or above the cleaned end %d is missing", o, end)
		}
	}
	for k, o := range latest {
		if _, ok := got[o]; !ok && !(written[o].value == nil && tombstonesGone) {
			t.Fatalf("latest record of %q at %d is missing", k, o)
		}
	}
}

func TestCleanKeepsLatestPerKeyAndDropsTombstonesAfterHorizon(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, [16]byte{1}, compactConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { l.Close() }()
	written := writeUpdates(t, l, 100, 1000)
	leo, start, size := l.LogEndOffset(), l.LogStartOffset(), l.Size()

	const now = 10_000_000
	res, err := l.Clean(now, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cleaned || res.EndOffset <= 0 || res.RecordsRemoved == 0 {
		t.Fatalf("first clean: %+v", res)
	}
	if l.LogEndOffset() != leo || l.LogStartOffset() != start || l.Size() >= size {
		t.Fatalf("after clean: LEO %d (was %d), start %d (was %d), size %d (was %d)",
			l.LogEndOffset(), leo, l.LogStartOffset(), start, l.Size(), size)
	}
	checkCompacted(t, l, written, res.EndOffset, false)
	tombstones := 0
	for o, r := range readRecords(t, l) {
		if o < res.EndOffset && r.value == nil {
			tombstones++
		}
	}
	if tombstones != 10 {
		t.Fatalf("%d tombstones kept before delete.retention.ms, want 10", tombstones)
	}

	// Nothing new is dirty and no horizon has passed: the cleaner leaves the log alone.
	if again, err := l.Clean(now+1, false); err != nil || again.Cleaned {
		t.Fatalf("second clean before the horizon: %+v, %v", again, err)
	}
	// After delete.retention.ms the tombstones go.
	res2, err := l.Clean(now+compactConfig().DeleteRetentionMs+1, false)
	if err != nil || !res2.Cleaned {
		t.Fatalf("clean after the horizon: %+v, %v", res2, err)
	}
	checkCompacted(t, l, written, res2.EndOffset, true)

	// The cleaned log survives a restart, clean or not.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(dir, [16]byte{1}, compactConfig(), nil); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("LEO after reopen %d, want %d", l.LogEndOffset(), leo)
	}
	checkCompacted(t, l, written, res2.EndOffset, true)
}

func TestCleanSkipsNonCompactedAndYoungSegments(t *testing.T) {
	cfg := compactConfig()
	cfg.CleanupPolicy = "delete"
	l, err := Open(t.TempDir(), [16]byte{1}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	writeUpdates(t, l, 10, 300)
	if res, err := l.Clean(10_000_000, true); err != nil || res.Cleaned {
		t.Fatalf("delete policy cleaned: %+v %v", res, err)
	}
	cfg.CleanupPolicy = "compact,delete"
	cfg.MinCompactionLagMs = 1 << 40 // every record is too young
	l.SetConfig(cfg)
	if res, err := l.Clean(10_000_000, false); err != nil || res.Cleaned {
		t.Fatalf("min.compaction.lag.ms ignored: %+v %v", res, err)
	}
	cfg.MinCompactionLagMs = 0
	cfg.MinCleanableDirtyRatio = 1 // reached: nothing is clean yet
	l.SetConfig(cfg)
	if res, err := l.Clean(10_000_000, false); err != nil || !res.Cleaned {
		t.Fatalf("compact,delete not cleaned: %+v %v", res, err)
	}
}

func TestCleanKeepsProducerStateAndTransactions(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, [16]byte{1}, compactConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// An idempotent producer overwrites one key; a transaction commits, another aborts.
	seq := int32(0)
	for i := range 400 {
		b := kvBatch(t, 0, 1000, record.BatchHeader{ProducerID: 7, ProducerEpoch: 0, BaseSequence: seq},
			[]record.KV{{Key: []byte("k"), Value: bytes.Repeat([]byte{byte(i)}, 100)}})
		if _, err := l.AppendAsLeader(b, 0, -1); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	txn := func(pid int64, typ int16) {
		b := kvBatch(t, 0, 1000, record.BatchHeader{ProducerID: pid, ProducerEpoch: 0, BaseSequence: 0, Attributes: record.TransactionalBit},
			[]record.KV{{Key: []byte("t"), Value: []byte(fmt.Sprint(pid))}})
		if _, err := l.AppendAsLeader(b, 0, -1); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendControlAsLeader(record.BuildEndTxnMarker(typ, pid, 0, 0, 0, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	txn(8, record.ControlCommit)
	txn(9, record.ControlAbort)
	// An open transaction bounds the cleanable section.
	open := kvBatch(t, 0, 1000, record.BatchHeader{ProducerID: 10, ProducerEpoch: 0, BaseSequence: 0, Attributes: record.TransactionalBit},
		[]record.KV{{Key: []byte("k"), Value: []byte("open")}})
	openInfo, err := l.AppendAsLeader(open, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		b := kvBatch(t, 0, 1000, record.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]record.KV{{Key: []byte("k"), Value: bytes.Repeat([]byte{byte(i)}, 100)}})
		if _, err := l.AppendAsLeader(b, 0, -1); err != nil {
			t.Fatal(err)
		}
	}
	res, err := l.Clean(10_000_000, true)
	if err != nil || !res.Cleaned || res.EndOffset > openInfo.FirstOffset {
		t.Fatalf("clean: %+v %v (open transaction at %d)", res, err, openInfo.FirstOffset)
	}
	got := readRecords(t, l)
	if _, ok := got[openInfo.FirstOffset]; !ok {
		t.Fatal("the open transaction's record was removed")
	}
	aborted := l.AbortedTransactions(0, l.LogEndOffset())
	if len(aborted) != 1 || aborted[0].ProducerID != 9 {
		t.Fatalf("aborted transactions after cleaning: %+v", aborted)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// After a restart the producer state still knows producer 7's sequence.
	if l, err = Open(dir, [16]byte{1}, compactConfig(), nil); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if aborted := l.AbortedTransactions(0, l.LogEndOffset()); len(aborted) != 1 || aborted[0].ProducerID != 9 {
		t.Fatalf("aborted transactions after reopen: %+v", aborted)
	}
	b := kvBatch(t, 0, 1000, record.BatchHeader{ProducerID: 7, ProducerEpoch: 0, BaseSequence: seq},
		[]record.KV{{Key: []byte("k"), Value: []byte("next")}})
	if _, err := l.AppendAsLeader(b, 0, -1); err != nil {
		t.Fatalf("next sequence of producer 7 after cleaning and reopen: %v", err)
	}
}

// TestCleanCrashLeavesValidLog simulates a cleaner killed at each step: a half-written
// .cleaned file, and a complete .swap file whose replaced segments are partly deleted.
// Reopening must give a readable, correct log that cleans to the same result.
func TestCleanCrashLeavesValidLog(t *testing.T) {
	cleanDir, crashDir := t.TempDir(), t.TempDir()
	l, err := Open(cleanDir, [16]byte{1}, compactConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	written := writeUpdates(t, l, 100, 200)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	copyDir(t, cleanDir, crashDir)
	if l, err = Open(cleanDir, [16]byte{1}, compactConfig(), nil); err != nil {
		t.Fatal(err)
	}
	bases := make([]int64, 0)
	l.rw.RLock()
	for _, s := range l.segs {
		bases = append(bases, s.base)
	}
	l.rw.RUnlock()
	if len(bases) < 4 {
		t.Fatalf("want several segments, have %d", len(bases))
	}
	res, err := l.Clean(10_000_000, true)
	if err != nil || !res.Cleaned {
		t.Fatal(res, err)
	}
	want := readRecords(t, l)

	// The crash: segment 0 was cleaned and swapped in but its old index is still there
	// and the old .log not yet deleted; segment 1's cleaning was cut short.
	cleaned0, err := os.ReadFile(filepath.Join(cleanDir, segmentName(bases[0])+logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(crashDir, segmentName(bases[0])+logSuffix+swapSuffix), cleaned0)
	writeFile(t, filepath.Join(crashDir, segmentName(bases[1])+logSuffix+cleanedSuffix), cleaned0[:len(cleaned0)/2])
	l.Close()

	c, err := Open(crashDir, [16]byte{1}, compactConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkCompacted(t, c, written, bases[1], false)
	for _, name := range listNames(t, crashDir) {
		if filepath.Ext(name) == swapSuffix || filepath.Ext(name) == cleanedSuffix {
			t.Fatalf("leftover %s after recovery", name)
		}
	}
	if res, err := c.Clean(10_000_000, true); err != nil || !res.Cleaned {
		t.Fatal(res, err)
	}
	got := readRecords(t, c)
	if len(got) != len(want) {
		t.Fatalf("recovered log cleans to %d records, want %d", len(got), len(want))
	}
	for o, r := range want {
		if g, ok := got[o]; !ok || !bytes.Equal(g.key, r.key) || !bytes.Equal(g.value, r.value) {
			t.Fatalf("offset %d differs after recovery and cleaning", o)
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	for _, name := range listNames(t, from) {
		data, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(to, name), data)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func listNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestCleanRecompressesWithSameCodec checks that a partly retained compressed batch is
// rewritten with its codec.
func TestCleanRecompressesWithSameCodec(t *testing.T) {
	for codec := int8(1); codec <= 4; codec++ {
		b := kvBatch(t, codec, 5, record.BatchHeader{ProducerID: -1, BaseSequence: -1},
			[]record.KV{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}, {Key: []byte("a"), Value: []byte("3")}})
		c := &cleaning{keys: map[string]int64{"a": 2, "b": 1}, lastRecords: map[int64]lastRecord{}, l: &Log{cfg: compactConfig()}}
		out, err := c.filterBatch(b, newTxnCleaning(nil), false)
		if err != nil {
			t.Fatal(err)
		}
		if out.Compression() != codec || out.RecordCount() != 2 || out.LastOffset() != 2 || out.Check() != nil {
			t.Fatalf("codec %d: rewritten batch codec %d, %d records, last offset %d, check %v",
				codec, out.Compression(), out.RecordCount(), out.LastOffset(), out.Check())
		}
		var offs []int64
		for it := record.IterRecords(out); it.Next(); {
			if ts := it.Record().Timestamp; ts != 5 {
				t.Fatalf("timestamp %d, want 5", ts)
			}
			offs = append(offs, it.Record().Offset)
		}
		if fmt.Sprint(offs) != "[1 2]" {
			t.Fatalf("codec %d: offsets %v", codec, offs)
		}
	}
}

// batchView is what a test asserts of a batch in the log: its offsets, whether it is a
// control batch, its producer and its record count.
type batchView struct {
	base, last int64
	control    bool
	pid        int64
	records    int32
}

// logBatches returns every batch of l in offset order.
func logBatches(t testing.TB, l *Log) []batchView {
	t.Helper()
	var out []batchView
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		data, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(data) == 0 {
			break
		}
		for bi := record.IterBatches(data); bi.Next(); {
			b := bi.Batch()
			out = append(out, batchView{b.BaseOffset(), b.LastOffset(), b.IsControl(), b.ProducerID(), b.RecordCount()})
			off = b.NextOffset()
		}
	}
	return out
}

// TestCleanRemovesAbortedTransactionsAndMarkers asserts Kafka's LogCleaner rules for
// transactions (Cleaner.cleanInto, CleanedTransactionMetadata, MemoryRecords.filterTo):
// an aborted transaction's batches lose their records in the first pass (dropped, or
// emptied when they are the producer's last) and its keys do not enter the offset map;
// its ABORT marker stays, with its .txnindex entry, while that pass read data of it; a
// later pass that finds no data of its transaction gives the marker a delete horizon of
// delete.retention.ms and drops the .txnindex entry; a pass after the horizon removes
// the marker. A COMMIT marker goes the same way once its transaction's data is gone.
func TestCleanRemovesAbortedTransactionsAndMarkers(t *testing.T) {
	l, err := Open(t.TempDir(), [16]byte{1}, compactConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	seqs := map[int64]int32{}
	txn := func(pid int64, typ int16, kvs ...string) (first, marker int64) {
		var recs []record.KV
		for i := 0; i < len(kvs); i += 2 {
			recs = append(recs, record.KV{Key: []byte(kvs[i]), Value: []byte(kvs[i+1])})
		}
		b := kvBatch(t, 0, 1000, record.BatchHeader{ProducerID: pid, ProducerEpoch: 0, BaseSequence: seqs[pid], Attributes: record.TransactionalBit}, recs)
		seqs[pid] += int32(len(recs))
		info, err := l.AppendAsLeader(b, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		m, err := l.AppendControlAsLeader(record.BuildEndTxnMarker(typ, pid, 0, 0, 0, 1000), 0)
		if err != nil {
			t.Fatal(err)
		}
		return info.FirstOffset, m.FirstOffset
	}
	// Producer 20 aborts a transaction writing "x" and "a", then commits one writing "y";
	// producer 21 commits "a", then commits "b" (so its first batch is not its last).
	abFirst, abMarker := txn(20, record.ControlAbort, "x", "aborted", "a", "aborted")
	_, c20 := txn(20, record.ControlCommit, "y", "committed")
	c21First, c21Marker := txn(21, record.ControlCommit, "a", "committed-21")
	_, c21b := txn(21, record.ControlCommit, "b", "kept")
	// Later plain writes supersede "a" and fill segments past the transactions.
	for i := range 400 {
		b := kvBatch(t, 0, 1000, record.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]record.KV{{Key: []byte("a"), Value: bytes.Repeat([]byte{byte(i)}, 100)}})
		if _, err := l.AppendAsLeader(b, 0, -1); err != nil {
			t.Fatal(err)
		}
	}
	at := func(off int64) (batchView, bool) {
		for _, b := range logBatches(t, l) {
			if b.base <= off && off <= b.last {
				return b, true
			}
		}
		return batchView{}, false
	}
	aborted := func() []AbortedTxn { return l.AbortedTransactions(0, l.LogEndOffset()) }

	now := int64(10_000_000)
	if res, err := l.Clean(now, true); err != nil || !res.Cleaned || res.EndOffset <= c21b {
		t.Fatalf("first pass: %+v %v", res, err)
	}
	if b, ok := at(abFirst); ok && b.records != 0 {
		t.Fatalf("first pass kept the aborted transaction's batch: %+v", b)
	}
	if got := readRecords(t, l); string(got[abFirst].key) == "x" {
		t.Fatal(`first pass kept the aborted record "x"`)
	}
	for _, m := range []int64{abMarker, c21Marker} {
		if b, ok := at(m); !ok || b.records != 1 {
			t.Fatalf("first pass removed the marker at %d whose data it read: %+v %v", m, b, ok)
		}
	}
	if a := aborted(); len(a) != 1 || a[0].LastOffset != abMarker {
		t.Fatalf("aborted transactions after the first pass: %+v, want the one ending at %d", a, abMarker)
	}
	if b, ok := at(c21First); ok && b.records != 0 {
		t.Fatalf(`first pass kept producer 21's superseded "a": %+v`, b)
	}

	// Second pass: no data left of either transaction, so the markers get a horizon.
	now++
	if res, err := l.Clean(now, true); err != nil || !res.Cleaned {
		t.Fatalf("second pass: %+v %v", res, err)
	}
	for _, m := range []int64{abMarker, c21Marker} {
		if b, ok := at(m); !ok || b.records != 1 {
			t.Fatalf("second pass removed the marker at %d before delete.retention.ms: %+v %v", m, b, ok)
		}
	}
	if a := aborted(); len(a) != 0 {
		t.Fatalf("aborted transactions after the second pass (no data left): %+v", a)
	}
	// Markers with data left stay: producer 20's commit ("y" is its last data) and
	// producer 21's second commit ("b").
	for _, m := range []int64{c20, c21b} {
		if b, ok := at(m); !ok || b.records != 1 {
			t.Fatalf("marker at %d with data left was removed: %+v %v", m, b, ok)
		}
	}

	// A pass before the horizon keeps them; the first pass after it removes them.
	if _, err := l.Clean(now+compactConfig().DeleteRetentionMs-1, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := at(abMarker); !ok {
		t.Fatal("the ABORT marker was removed before its delete horizon")
	}
	if _, err := l.Clean(now+compactConfig().DeleteRetentionMs+1, true); err != nil {
		t.Fatal(err)
	}
	for _, m := range []int64{abMarker, c21Marker} {
		if b, ok := at(m); ok && b.records != 0 {
			t.Fatalf("marker at %d survived its delete horizon: %+v", m, b)
		}
	}
	for _, m := range []int64{c20, c21b} {
		if b, ok := at(m); !ok || b.records != 1 {
			t.Fatalf("marker at %d with data left was removed: %+v %v", m, b, ok)
		}
	}
	if got := readRecords(t, l); string(got[c21b-1].value) != "kept" {
		t.Fatalf(`producer 21's committed "b" lost: %q`, got[c21b-1].value)
	}
}

// TestCleanerOffsetCheckpoint: the first dirty offset of a cleaned log is written to
// cleaner-offset-checkpoint and read back when the log directory is opened again, so
// the first pass after a restart does not take the whole log as dirty.
func TestCleanerOffsetCheckpoint(t *testing.T) {
	dir := t.TempDir()
	m, l := openManaged(t, dir, compactConfig())
	writeUpdates(t, l, 50, 40)
	res, err := l.Clean(10_000_000, true)
	if err != nil || !res.Cleaned {
		t.Fatalf("clean: %+v %v", res, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if ck := string(mustRead(t, filepath.Join(dir, "cleaner-offset-checkpoint"))); ck != fmt.Sprintf("0\n1\nt 0 %d\n", res.EndOffset) {
		t.Fatalf("cleaner-offset-checkpoint %q, want t 0 %d", ck, res.EndOffset)
	}
	_, l = openManaged(t, dir, compactConfig())
	again, err := l.Clean(10_000_000, false)
	if err != nil || again.Cleaned || again.FirstDirty != res.EndOffset {
		t.Fatalf("pass after the restart: %+v %v, want nothing dirty from %d", again, err, res.EndOffset)
	}
}

// TestCleanConcurrentWithAppendsAndDeletes: passes run while other goroutines append to
// the log and advance its log start (deleting segments the pass is reading); every pass
// either swaps or is abandoned, never fails, and the log ends with the latest value of
// every key at or above its log start.
func TestCleanConcurrentWithAppendsAndDeletes(t *testing.T) {
	l, err := Open(t.TempDir(), [16]byte{1}, compactConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const keys, rounds = 20, 3000
	done := make(chan error, 1)
	go func() {
		for i := range rounds {
			k := fmt.Sprintf("k%02d", i%keys)
			b := kvBatch(t, 0, 1000, record.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
				[]record.KV{{Key: []byte(k), Value: []byte(fmt.Sprint(i))}})
			if _, err := l.AppendAsLeader(b, 0, -1); err != nil {
				done <- err
				return
			}
			if i%700 == 699 {
				if err := l.AdvanceLogStartOffset(int64(i - 100)); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	passes := 0
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		if _, err := l.Clean(10_000_000, true); err != nil {
			t.Fatalf("pass %d: %v", passes, err)
		}
		passes++
	}
	if _, err := l.Clean(10_000_000, true); err != nil {
		t.Fatal(err)
	}
	latest, byOffset := map[string]string{}, readRecords(t, l)
	for off := l.LogStartOffset(); off < l.LogEndOffset(); off++ {
		if r, ok := byOffset[off]; ok {
			latest[string(r.key)] = string(r.value)
		}
	}
	for i := rounds - keys; i < rounds; i++ {
		if k := fmt.Sprintf("k%02d", i%keys); latest[k] != fmt.Sprint(i) {
			t.Fatalf("key %s: latest value %q, want %d (after %d passes)", k, latest[k], i, passes)
		}
	}
}
