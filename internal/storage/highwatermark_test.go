package storage

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/record"
)

func externalConfig() Config {
	c := smallConfig()
	c.ExternalHighWatermark = true
	return c
}

func closedNow(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func checkHW(t *testing.T, what string, l *Log, hw, lso int64) {
	t.Helper()
	if gh, gl := l.HighWatermarkAndLSO(); gh != hw || gl != lso || l.HighWatermark() != hw {
		t.Fatalf("%s: HW %d LSO %d (HighWatermark %d), want %d %d", what, gh, gl, l.HighWatermark(), hw, lso)
	}
}

// TestHighWatermarkFollowsLEO: without ExternalHighWatermark every append, truncation and
// open sets HW = LEO, and UpdateHighWatermark changes nothing.
func TestHighWatermarkFollowsLEO(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, smallConfig())
	for i := 0; i < 20; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 2, valueSize: 50}), 0)
		checkHW(t, "append", l, l.LogEndOffset(), l.LogEndOffset())
	}
	if l.UpdateHighWatermark(3) || l.UpdateHighWatermark(1000) {
		t.Fatal("UpdateHighWatermark moved an HW that follows the LEO")
	}
	if err := l.TruncateTo(17); err != nil {
		t.Fatal(err)
	}
	checkHW(t, "truncation", l, 16, 16)
	l.Close()
	l = openT(t, dir, smallConfig())
	defer l.Close()
	checkHW(t, "open", l, 16, 16)
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	checkHW(t, "TruncateFullyAndStartAt", l, 100, 100)
}

// TestExternalHighWatermark: with ExternalHighWatermark the HW moves only by
// UpdateHighWatermark, clamped to [log start, LEO] and never back, each advance waking
// Changed; Kafka's clamps move it otherwise.
func TestExternalHighWatermark(t *testing.T) {
	l := openT(t, t.TempDir(), externalConfig())
	defer l.Close()
	checkHW(t, "new log", l, 0, 0)
	for i := 0; i < 20; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 2, valueSize: 50}), 0)
	}
	checkHW(t, "appends", l, 0, 0)
	ch := l.Changed()
	if !l.UpdateHighWatermark(10) || !closedNow(ch) {
		t.Fatal("an advance to 10 was refused or did not wake Changed")
	}
	checkHW(t, "advance", l, 10, 10)
	ch = l.Changed()
	for _, hw := range []int64{10, 9, 0, -5} {
		if l.UpdateHighWatermark(hw) {
			t.Fatalf("UpdateHighWatermark(%d) moved the HW back", hw)
		}
	}
	if closedNow(ch) {
		t.Fatal("a refused update woke Changed")
	}
	checkHW(t, "no moves back", l, 10, 10)
	if !l.UpdateHighWatermark(1 << 40) {
		t.Fatal("advance past the LEO refused")
	}
	checkHW(t, "clamped to the LEO", l, 40, 40)
	if err := l.TruncateTo(36); err != nil { // below the HW: capped at the new LEO
		t.Fatal(err)
	}
	checkHW(t, "truncated below the HW", l, 36, 36)
	mustAppend(t, l, mkBatch(t, batchOpts{n: 4}), 0)
	if err := l.TruncateTo(38); err != nil { // above it: kept
		t.Fatal(err)
	}
	checkHW(t, "truncated above the HW", l, 36, 36)
	// The log start never passes the HW (Kafka's maybeIncrementLogStartOffset).
	size := l.Size()
	if err := l.AdvanceLogStartOffset(37); !isErr(err, ErrOffsetOutOfRange) || l.LogStartOffset() != 0 || l.Size() != size {
		t.Fatalf("log start above the HW: %v, start %d", err, l.LogStartOffset())
	}
	if err := l.AdvanceLogStartOffset(36); err != nil || l.LogStartOffset() != 36 {
		t.Fatalf("log start at the HW: %v, start %d", err, l.LogStartOffset())
	}
	checkHW(t, "log start at the HW", l, 36, 36)
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	checkHW(t, "TruncateFullyAndStartAt", l, 1000, 1000)
	// Switching to an HW that follows the LEO moves it there.
	mustAppend(t, l, mkBatch(t, batchOpts{n: 3}), 0)
	l.SetConfig(smallConfig())
	checkHW(t, "switched to follow the LEO", l, 1003, 1003)
}

// TestHighWatermarkBoundsRetentionAndCleaning: retention deletes no segment holding
// offsets at or above the HW (Kafka's deletableSegments) and the cleaner cleans nothing
// past the LSO, which the HW bounds.
func TestHighWatermarkBoundsRetentionAndCleaning(t *testing.T) {
	cfg := externalConfig()
	cfg.RetentionBytes = 0
	l := openT(t, t.TempDir(), cfg)
	defer l.Close()
	for i := 0; i < 40; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 2, valueSize: 50}), 0)
	}
	bases := segmentBases(l)
	hw := bases[2] + 1 // inside the third segment
	l.UpdateHighWatermark(hw)
	if n, err := l.ApplyRetention(0); err != nil || n != 2 {
		t.Fatalf("retention deleted %d segments (%v), want the 2 wholly below the HW %d of %v", n, err, hw, bases)
	}
	if l.LogStartOffset() != bases[2] || l.LogStartOffset() > l.HighWatermark() {
		t.Fatalf("log start %d, HW %d", l.LogStartOffset(), l.HighWatermark())
	}

	cc := compactConfig()
	cc.ExternalHighWatermark = true
	c := openT(t, t.TempDir(), cc)
	defer c.Close()
	writeUpdates(t, c, 100, 60)
	if res, err := c.Clean(0, true); err != nil || res.Cleaned {
		t.Fatalf("cleaned with the HW at 0: %+v %v", res, err)
	}
	c.UpdateHighWatermark(c.LogEndOffset())
	if res, err := c.Clean(0, true); err != nil || !res.Cleaned {
		t.Fatalf("not cleaned with the HW at the LEO: %+v %v", res, err)
	}
}

// TestTransactionUnstableUntilHighWatermarkPassesMarker: a decided transaction stays
// below the LSO until the HW passes its marker (Kafka's unreplicated transactions), with
// an external HW and across a truncation's reload.
func TestTransactionUnstableUntilHighWatermarkPassesMarker(t *testing.T) {
	l := openT(t, t.TempDir(), externalConfig())
	defer l.Close()
	mustAppend(t, l, mkBatch(t, batchOpts{n: 2}), 0)                                                                     // 0..1
	mustAppend(t, l, mkBatch(t, batchOpts{n: 3, pid: 5, txn: true}), 0)                                                  // 2..4
	mustAppend(t, l, mkBatch(t, batchOpts{n: 1}), 0)                                                                     // 5
	if _, err := l.AppendControlAsLeader(record.BuildEndTxnMarker(record.ControlCommit, 5, 0, 0, 0, 0), 0); err != nil { // 6
		t.Fatal(err)
	}
	mustAppend(t, l, mkBatch(t, batchOpts{n: 2}), 0) // 7..8
	l.UpdateHighWatermark(4)
	checkHW(t, "HW inside the transaction", l, 4, 2)
	l.UpdateHighWatermark(6)
	checkHW(t, "HW at the marker", l, 6, 2)
	l.UpdateHighWatermark(7)
	checkHW(t, "HW past the marker", l, 7, 7)

	// A truncation's reload replays the marker; the HW below it keeps it unstable.
	m := openT(t, t.TempDir(), externalConfig())
	defer m.Close()
	mustAppend(t, m, mkBatch(t, batchOpts{n: 3, pid: 5, txn: true}), 0)                                                 // 0..2
	if _, err := m.AppendControlAsLeader(record.BuildEndTxnMarker(record.ControlAbort, 5, 0, 0, 0, 0), 0); err != nil { // 3
		t.Fatal(err)
	}
	mustAppend(t, m, mkBatch(t, batchOpts{n: 4}), 0) // 4..7
	m.UpdateHighWatermark(3)
	if err := m.TruncateTo(6); err != nil {
		t.Fatal(err)
	}
	checkHW(t, "after the truncation", m, 3, 0)
	m.UpdateHighWatermark(4)
	checkHW(t, "HW past the marker after the truncation", m, 4, 4)

	// With one replica the HW passes every marker at its append.
	f := openT(t, t.TempDir(), smallConfig())
	defer f.Close()
	mustAppend(t, f, mkBatch(t, batchOpts{n: 3, pid: 5, txn: true}), 0)
	checkHW(t, "open transaction, HW = LEO", f, 3, 0)
	if _, err := f.AppendControlAsLeader(record.BuildEndTxnMarker(record.ControlCommit, 5, 0, 0, 0, 0), 0); err != nil {
		t.Fatal(err)
	}
	checkHW(t, "committed, HW = LEO", f, 4, 4)
}

// TestHighWatermarkCheckpoint: the Manager writes every log's HW to
// replication-offset-checkpoint (Kafka's OffsetCheckpointFile: version 0, count, "topic
// partition offset"), and a log opened with an external HW starts there, clamped to
// [log start, LEO]; at the log start without an entry or with a torn file (a WARN).
func TestHighWatermarkCheckpoint(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	m, a := openManagedWith(t, data, "a", externalConfig(), quietLogger())
	b, _ := m.Open("b", 2, [16]byte{2}, smallConfig()) // follows its LEO
	for i := 0; i < 30; i++ {
		mustAppend(t, a, mkBatch(t, batchOpts{n: 2, valueSize: 50}), 0)
		mustAppend(t, b, mkBatch(t, batchOpts{n: 1}), 0)
	}
	a.UpdateHighWatermark(21)
	if err := m.checkpointHighWatermarks(m.openLogs()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(data, "replication-offset-checkpoint")
	if got, _ := os.ReadFile(path); string(got) != "0\n2\na 0 21\nb 2 30\n" {
		t.Fatalf("replication-offset-checkpoint %q", got)
	}
	a.UpdateHighWatermark(50)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "0\n2\na 0 50\nb 2 30\n" {
		t.Fatalf("replication-offset-checkpoint after Close %q", got)
	}

	reopen := func(what string, wantHW int64, wantWarn bool) {
		t.Helper()
		logger, lb := newLogger()
		m, l := openManagedWith(t, data, "a", externalConfig(), logger)
		defer m.Close()
		if l.HighWatermark() != wantHW {
			t.Fatalf("%s: HW %d, want %d", what, l.HighWatermark(), wantHW)
		}
		if warned := strings.Contains(lb.String(), "level=WARN"); warned != wantWarn {
			t.Fatalf("%s: warnings %v, want %v:\n%s", what, warned, wantWarn, lb.String())
		}
		if what == "entry past the LEO" {
			if err := l.AdvanceLogStartOffset(30); err != nil {
				t.Fatal(err)
			}
		}
	}
	reopen("clean restart", 50, false)
	writeFile(t, path, []byte("0\n1\na 0 1000\n"))
	reopen("entry past the LEO", 60, false) // and the log start moves to 30
	writeFile(t, path, []byte("0\n1\nb 2 7\n"))
	reopen("no entry: the log start", 30, false)
	writeFile(t, path, []byte("0\n1\na 0 3\n"))
	reopen("entry below the log start", 30, false)
	writeFile(t, path, []byte("0\n3\na 0 9"))
	reopen("torn file", 30, true)

	// The torn file is rewritten whole.
	m, _ = openManagedWith(t, data, "a", externalConfig(), quietLogger())
	m.Close()
	if tps, err := readOffsetsCheckpoint(path); err != nil || tps[kafka.TopicPartition{Topic: "a", Partition: 0}] != 30 {
		t.Fatalf("rewritten checkpoint %v %v", tps, err)
	}
}

// TestUncleanRestart simulates kill -9: the log is written, never closed, and its
// directory opened again. The HW comes from the last checkpoint, not what the dead
// process had reached; the producer state equals a full replay's; a torn tail loses its
// snapshots and caps the HW at the recovered LEO.
func TestUncleanRestart(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	m, l := openManaged(t, data, externalConfig())
	writeProducers(t, l, 10)
	l.UpdateHighWatermark(l.LogEndOffset() - 20)
	checkpointed := l.HighWatermark()
	// What RunBackground does every replica.high.watermark.checkpoint.interval.ms.
	if err := m.checkpointHighWatermarks(m.openLogs()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{pid: 900, seq: int32(i), valueSize: 40}), 3)
	}
	l.UpdateHighWatermark(l.LogEndOffset()) // never checkpointed
	// kill -9: no Close, no flush; the files stay as the process left them.

	m2, l2 := openManaged(t, data, externalConfig())
	dir := filepath.Join(data, "t-0")
	if l2.LogEndOffset() != l.LogEndOffset() || l2.HighWatermark() != checkpointed {
		t.Fatalf("reopened: LEO %d HW %d, want %d and the checkpointed %d", l2.LogEndOffset(), l2.HighWatermark(), l.LogEndOffset(), checkpointed)
	}
	sameView(t, "after kill -9", viewOf(l2), viewOf(replayed(t, dir)))

	// Again, with the active segment's tail lost: the snapshots past the recovered LEO
	// go, the HW is capped at it.
	l2.UpdateHighWatermark(l2.LogEndOffset())
	if err := m2.checkpointHighWatermarks(m2.openLogs()); err != nil {
		t.Fatal(err)
	}
	bases := segmentBases(l2)
	last := filepath.Join(dir, segmentName(bases[len(bases)-1])+logSuffix)
	if err := os.Truncate(last, 10); err != nil {
		t.Fatal(err)
	}
	lastRoll := bases[len(bases)-1]
	writeFile(t, snapshotPath(dir, lastRoll+50), mustRead(t, snapshotPath(dir, lastRoll))) // as if written at a roll the crash lost
	_, l3 := openManaged(t, data, externalConfig())
	if l3.LogEndOffset() != lastRoll || l3.HighWatermark() != lastRoll {
		t.Fatalf("after a torn tail: LEO %d HW %d, want both %d", l3.LogEndOffset(), l3.HighWatermark(), lastRoll)
	}
	for _, off := range snapshotOffsets(t, dir) {
		if off > lastRoll {
			t.Fatalf("snapshot at %d kept past the LEO %d", off, lastRoll)
		}
	}
	sameView(t, "after a torn tail", viewOf(l3), viewOf(replayed(t, dir)))
}

// TestFollowerLogOperations: a follower's appends record each batch's leader epoch in
// the cache and leader-epoch-checkpoint, its HW follows min(leader HW, LEO), its log
// start moves up to the leader's but never past its HW, and OffsetForLeaderEpoch is
// answered from the cache as Kafka's LeaderEpochFileCache.endOffsetFor.
func TestFollowerLogOperations(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, externalConfig())
	defer l.Close()
	var fetched []byte
	next := int64(0)
	for i, epoch := range []int32{2, 2, 2, 4, 4, 7, 7, 7, 7, 7} {
		for k := 0; k < 3; k++ {
			b := mkBatch(t, batchOpts{base: next, n: 2, epoch: epoch, ts: int64(i), valueSize: 60})
			fetched = append(fetched, b...)
			next = b.NextOffset()
		}
	}
	if _, err := l.AppendAsFollower(fetched); err != nil {
		t.Fatal(err)
	}
	if got := string(mustRead(t, filepath.Join(dir, "leader-epoch-checkpoint"))); got != "0\n3\n2 0\n4 18\n7 30\n" {
		t.Fatalf("leader-epoch-checkpoint %q", got)
	}
	leaderHW := int64(44)
	l.UpdateHighWatermark(min(leaderHW, l.LogEndOffset()))
	checkHW(t, "follower HW", l, 44, 44)
	size := l.Size()
	if err := l.AdvanceLogStartOffset(50); !isErr(err, ErrOffsetOutOfRange) || l.Size() != size {
		t.Fatalf("leader log start past the follower's HW: %v", err)
	}
	if err := l.AdvanceLogStartOffset(40); err != nil || l.LogStartOffset() != 40 || l.Size() >= size {
		t.Fatalf("leader log start 40: %v, start %d", err, l.LogStartOffset())
	}
	if e := l.EpochEntries(); len(e) != 1 || e[0] != (EpochEntry{7, 40}) {
		t.Fatalf("epochs after the log start moved: %v", e)
	}
	// A fresh cache of the same history: every case of Kafka's endOffsetFor.
	c := openT(t, t.TempDir(), externalConfig())
	defer c.Close()
	if _, err := c.AppendAsFollower(fetched); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		req  int32
		e    int32
		off  int64
		what string
	}{
		{-1, -1, -1, "UNDEFINED_EPOCH"},
		{-2, -2, 0, "another negative epoch: below every entry"},
		{0, 0, 0, "below the first entry: the requested epoch, the first start"},
		{2, 2, 18, "an entry: the next entry's start"},
		{3, 2, 18, "between entries: the one below and the next start"},
		{5, 4, 30, "between entries"},
		{7, 7, 60, "the latest: the LEO"},
		{8, -1, -1, "above every entry"},
	} {
		if e, off := c.EndOffsetForEpoch(k.req); e != k.e || off != k.off {
			t.Fatalf("EndOffsetForEpoch(%d) = %d %d, want %d %d (%s)", k.req, e, off, k.e, k.off, k.what)
		}
	}
	var empty epochCache
	if e, off := empty.endOffsetFor(3, 10); e != -1 || off != -1 {
		t.Fatalf("empty cache: %d %d", e, off)
	}
}

// TestAppendPathDoesNotAllocate: leader appends (plain, idempotent, transactional, a
// marker), HW updates and LSO reads allocate nothing.
func TestAppendPathDoesNotAllocate(t *testing.T) {
	for _, cfg := range []Config{DefaultConfig(), func() Config { c := DefaultConfig(); c.ExternalHighWatermark = true; return c }()} {
		l := openT(t, t.TempDir(), cfg)
		plain := mkBatch(t, batchOpts{n: 3, valueSize: 10})
		idem := mkBatch(t, batchOpts{n: 3, valueSize: 10, pid: 9})
		txn := mkBatch(t, batchOpts{n: 1, pid: 11, txn: true})
		marker := record.BuildEndTxnMarker(record.ControlCommit, 11, 0, 1, 0, 0)
		seq, txnSeq := int32(0), int32(0)
		n := testing.AllocsPerRun(200, func() {
			binary.BigEndian.PutUint32(idem[53:], uint32(seq))
			binary.BigEndian.PutUint32(txn[53:], uint32(txnSeq))
			seq, txnSeq = seq+3, txnSeq+1
			for _, b := range []record.Batch{plain, idem, txn} {
				if _, err := l.AppendAsLeader(b, 1, -1); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := l.AppendControlAsLeader(marker, 1); err != nil {
				t.Fatal(err)
			}
			l.UpdateHighWatermark(l.LogEndOffset())
			l.HighWatermarkAndLSO()
		})
		if n != 0 {
			t.Fatalf("external HW %v: %v allocations per round", cfg.ExternalHighWatermark, n)
		}
		l.Close()
	}
}
