package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/record"
)

// producerView is what a log's producer state answers: DescribeProducers, the open
// transactions and the first unstable offset.
type producerView struct {
	Entries []ProducerEntry
	Open    []OpenTxn
	FUO     int64
}

func viewOf(l *Log) producerView {
	f, ok := l.FirstUnstableOffset()
	if !ok {
		f = -1
	}
	return producerView{Entries: l.ProducerEntries(), Open: l.OpenTransactions(), FUO: f}
}

func sameView(t *testing.T, what string, got, want producerView) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: producer state differs from a full replay's:\n got  %+v\n want %+v", what, got, want)
	}
}

// workload is the producers writeProducers uses and where each stands.
type workload struct {
	seqs map[int64]int32        // idempotent producer → next sequence
	last map[int64]record.Batch // its last batch, for a retry
}

// writeProducers appends rounds of batches over several segments: idempotent producers
// 100..105, a transaction committed (pid 200, coordinator epoch 7), one aborted (201),
// one left open from the first round on (202), a producer whose epoch is bumped (203)
// and batches without a producer ID.
func writeProducers(t testing.TB, l *Log, rounds int) *workload {
	t.Helper()
	w := &workload{seqs: map[int64]int32{}, last: map[int64]record.Batch{}}
	ts := int64(1_000_000)
	app := func(b record.Batch) {
		t.Helper()
		if _, err := l.AppendAsLeader(b, 3, -1); err != nil {
			t.Fatalf("append: %v", err)
		}
		ts += 10
	}
	marker := func(typ int16, pid int64, coord int32) {
		t.Helper()
		if _, err := l.AppendControlAsLeader(record.BuildEndTxnMarker(typ, pid, 0, 3, coord, ts), 3); err != nil {
			t.Fatalf("marker: %v", err)
		}
	}
	for r := 0; r < rounds; r++ {
		for pid := int64(100); pid < 106; pid++ {
			n := 1 + int(pid%3)
			b := mkBatch(t, batchOpts{pid: pid, seq: w.seqs[pid], n: n, ts: ts, valueSize: 30})
			w.seqs[pid] += int32(n)
			w.last[pid] = append(record.Batch(nil), b...)
			app(b)
		}
		app(mkBatch(t, batchOpts{n: 2, ts: ts, valueSize: 20}))
		if r == 0 {
			app(mkBatch(t, batchOpts{pid: 202, seq: 0, txn: true, ts: ts}))
		}
		if r%3 == 1 {
			app(mkBatch(t, batchOpts{pid: 200, seq: int32(r / 3), txn: true, ts: ts}))
			marker(record.ControlCommit, 200, 7)
			app(mkBatch(t, batchOpts{pid: 201, seq: int32(r / 3), txn: true, ts: ts}))
			marker(record.ControlAbort, 201, 8)
		}
		app(mkBatch(t, batchOpts{pid: 203, pepoch: int16(r / 4), seq: int32(r % 4), ts: ts}))
	}
	return w
}

// continues checks that every idempotent producer of w goes on where it stood: a retry of
// its last batch is a duplicate and its next sequence is accepted.
func (w *workload) continues(t *testing.T, what string, l *Log) {
	t.Helper()
	for pid := int64(100); pid < 106; pid++ {
		if info, err := l.AppendAsLeader(append(record.Batch(nil), w.last[pid]...), 3, -1); err != nil || !info.Duplicate {
			t.Fatalf("%s: retry of producer %d's last batch: %+v %v", what, pid, info, err)
		}
		if _, err := l.AppendAsLeader(mkBatch(t, batchOpts{pid: pid, seq: w.seqs[pid]}), 3, -1); err != nil {
			t.Fatalf("%s: producer %d's next sequence %d: %v", what, pid, w.seqs[pid], err)
		}
	}
}

// replayed opens a copy of dir without its producer snapshots above its first segment's
// base (the state there, which the segments retention deleted held, is no part of the
// log's batches): the producer state a full replay of the log's batch headers builds.
func replayed(t *testing.T, dir string) *Log {
	t.Helper()
	return replayedAt(t, dir, -1)
}

// replayedAt is replayed for a log whose log start offset is logStart.
func replayedAt(t *testing.T, dir string, logStart int64) *Log {
	t.Helper()
	cp := t.TempDir()
	first := segmentBase(t, segmentFiles(t, dir, logSuffix)[0])
	for _, name := range listNames(t, dir) {
		if stem, ok := strings.CutSuffix(name, snapshotSuffix); !ok || segmentBase(t, stem+logSuffix) <= first {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(cp, name), data)
		}
	}
	l, err := openLog(cp, [16]byte{1}, smallConfig(), quietLogger(), -1, logStart, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func snapshotOffsets(t *testing.T, dir string) []int64 {
	t.Helper()
	var out []int64
	for _, name := range listNames(t, dir) {
		if stem, ok := strings.CutSuffix(name, snapshotSuffix); ok {
			out = append(out, segmentBase(t, stem+".log"))
		}
	}
	return out
}

// TestProducerSnapshotFiles: a snapshot is written at every segment roll, at the base of
// the new segment, and at Close, at the LEO, in Kafka's ProducerSnapshot layout.
func TestProducerSnapshotFiles(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, smallConfig())
	writeProducers(t, l, 12)
	bases := segmentBases(l)
	if len(bases) < 4 {
		t.Fatalf("want several segments, have %v", bases)
	}
	if got := snapshotOffsets(t, dir); !slices.Equal(got, bases[1:]) {
		t.Fatalf("snapshots %v, want one at each rolled segment's base %v", got, bases[1:])
	}
	leo := l.LogEndOffset()
	want := viewOf(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, dir); got[len(got)-1] != leo {
		t.Fatalf("snapshots %v, want one at the LEO %d after Close", got, leo)
	}

	// The bytes, field by field, as Kafka's ProducerStateManager.readSnapshot reads them.
	data, err := os.ReadFile(snapshotPath(dir, leo))
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.BigEndian.Uint16(data); v != 1 {
		t.Fatalf("version %d", v)
	}
	if crc := binary.BigEndian.Uint32(data[2:]); crc != crc32.Checksum(data[6:], crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatalf("CRC %08x is not the CRC-32C of the bytes after it", crc)
	}
	n := int(binary.BigEndian.Uint32(data[6:]))
	if n != len(want.Entries) || len(data) != 10+46*n {
		t.Fatalf("%d entries in %d bytes, want %d entries", n, len(data), len(want.Entries))
	}
	open := map[int64]int64{}
	for _, o := range want.Open {
		open[o.ProducerID] = o.FirstOffset
	}
	for i, e := range want.Entries {
		b := data[10+46*i:]
		txnFirst, ok := open[e.ProducerID]
		if !ok {
			txnFirst = -1
		}
		got := fmt.Sprint(int64(binary.BigEndian.Uint64(b)), int16(binary.BigEndian.Uint16(b[8:])),
			int32(binary.BigEndian.Uint32(b[10:])), int64(binary.BigEndian.Uint64(b[26:])),
			int32(binary.BigEndian.Uint32(b[34:])), int64(binary.BigEndian.Uint64(b[38:])))
		if w := fmt.Sprint(e.ProducerID, e.ProducerEpoch, e.LastSequence, e.LastTimestamp, e.CoordinatorEpoch, txnFirst); got != w {
			t.Fatalf("entry %d: producerId epoch lastSequence timestamp coordinatorEpoch currentTxnFirstOffset = %s, want %s", i, got, w)
		}
		lastOffset, delta := int64(binary.BigEndian.Uint64(b[14:])), int32(binary.BigEndian.Uint32(b[22:]))
		if e.ProducerID == 104 && (delta != 2 || lastOffset < 2) { // producer 104 writes batches of 3 records
			t.Fatalf("producer 104: lastOffset %d offsetDelta %d", lastOffset, delta)
		}
	}
	// An empty log writes none.
	empty := t.TempDir()
	openT(t, empty, smallConfig()).Close()
	if got := snapshotOffsets(t, empty); len(got) != 0 {
		t.Fatalf("empty log wrote snapshots %v", got)
	}
}

// TestSnapshotLoadEqualsFullReplay: a log reopened from its snapshots (a clean restart)
// has the producer state a full replay of the log builds, and its producers go on where
// they stood; so does one reopened from a roll snapshot with the batches after it replayed.
func TestSnapshotLoadEqualsFullReplay(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	m, l := openManaged(t, data, smallConfig())
	w := writeProducers(t, l, 12)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(data, "t-0")
	ref := replayed(t, dir)
	m, l = openManaged(t, data, smallConfig())
	sameView(t, "from the snapshot at the LEO", viewOf(l), viewOf(ref))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Without the snapshot at the LEO: the last roll snapshot, and the segment after it.
	snaps := snapshotOffsets(t, dir)
	os.Remove(snapshotPath(dir, snaps[len(snaps)-1]))
	m, l = openManaged(t, data, smallConfig())
	sameView(t, "from the last roll snapshot", viewOf(l), viewOf(ref))
	w.continues(t, "after a reload from a snapshot", l)
	w.continues(t, "after a full replay", ref)
	sameView(t, "after both went on", viewOf(l), viewOf(ref))
	m.Close()
}

// TestSnapshotsBoundReplay: a clean open and a truncation read no batch header below the
// newest snapshot at or below their point (a header damaged there, which a replay of
// every batch header trips on, goes unnoticed), and give the state of an intact log.
func TestSnapshotsBoundReplay(t *testing.T) {
	root := t.TempDir()
	intact, damaged := filepath.Join(root, "a"), filepath.Join(root, "b")
	m, l := openManaged(t, intact, smallConfig())
	writeProducers(t, l, 12)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	copyTree(t, intact, damaged)
	// The second batch of the first segment: neither its first batch nor one after its
	// last offset-index entry, the parts a clean open reads.
	seg := filepath.Join(damaged, "t-0", segmentName(0)+logSuffix)
	raw, _ := os.ReadFile(seg)
	second := int64(record.Batch(raw).Size())
	idx, _ := os.ReadFile(filepath.Join(damaged, "t-0", segmentName(0)+indexSuffix))
	if lastIndexed := int64(binary.BigEndian.Uint32(idx[len(idx)-4:])); lastIndexed <= second {
		t.Fatalf("the first segment's last index entry is at %d, want it past %d", lastIndexed, second)
	}
	raw[second+16] = 9 // magic
	writeFile(t, seg, raw)

	logger, lb := newLogger()
	_, ld := openManagedWith(t, damaged, "t", smallConfig(), logger)
	_, li := openManaged(t, intact, smallConfig())
	if strings.Contains(lb.String(), "level=WARN") {
		t.Fatalf("a clean open read the damaged header below the snapshot:\n%s", lb.String())
	}
	sameView(t, "clean open", viewOf(ld), viewOf(li))

	// Truncation into the last segment: the roll snapshot at its base and the batches
	// after it.
	bases := segmentBases(li)
	to := bases[len(bases)-1] + 5
	for _, x := range []*Log{li, ld} {
		if err := x.TruncateTo(to); err != nil {
			t.Fatalf("TruncateTo(%d): %v", to, err)
		}
	}
	sameView(t, "truncation", viewOf(ld), viewOf(li))
	if strings.Contains(lb.String(), "level=WARN") {
		t.Fatalf("the truncation read the damaged header:\n%s", lb.String())
	}
}

// copyTree copies a log directory with its partition directories.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			copyTree(t, filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(to, e.Name()), data)
	}
}

// TestTruncationReloadsProducerState: a truncation deletes the snapshots above the new
// LEO and leaves the producer state a full replay of the truncated log builds.
func TestTruncationReloadsProducerState(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, smallConfig())
	defer l.Close()
	writeProducers(t, l, 12)
	for _, to := range []int64{l.LogEndOffset() - 3, segmentBases(l)[2] + 1, segmentBases(l)[1], 4} {
		if err := l.TruncateTo(to); err != nil {
			t.Fatal(err)
		}
		for _, off := range snapshotOffsets(t, dir) {
			if off > l.LogEndOffset() {
				t.Fatalf("after TruncateTo(%d): snapshot at %d past the LEO %d", to, off, l.LogEndOffset())
			}
		}
		sameView(t, fmt.Sprintf("after TruncateTo(%d)", to), viewOf(l), viewOf(replayed(t, dir)))
	}
}

// TestCorruptSnapshotFallsBack: a snapshot that fails its checks (flipped byte, torn,
// unknown version) is logged at WARN, deleted, and an older one or a full replay gives the
// same producer state; nothing crashes.
func TestCorruptSnapshotFallsBack(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)-20] ^= 0x10; return b }},
		{"torn", func(b []byte) []byte { return b[:len(b)/2] }},
		{"version", func(b []byte) []byte { b[1] = 2; return b }},
		{"empty", func([]byte) []byte { return nil }},
		{"entry count", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[6:], 1<<30)
			binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoli))
			return b
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			m, l := openManaged(t, data, smallConfig())
			writeProducers(t, l, 10)
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(data, "t-0")
			snaps := snapshotOffsets(t, dir)
			// The two newest: the one Close wrote and the last roll's.
			for _, off := range snaps[len(snaps)-2:] {
				raw, _ := os.ReadFile(snapshotPath(dir, off))
				writeFile(t, snapshotPath(dir, off), c.damage(raw))
			}
			logger, lb := newLogger()
			_, l = openManagedWith(t, data, "t", smallConfig(), logger)
			if n := strings.Count(lb.String(), "ignoring unreadable producer snapshot"); n != 2 {
				t.Fatalf("%d warnings, want 2:\n%s", n, lb.String())
			}
			for _, off := range snaps[len(snaps)-2:] {
				if _, err := os.Stat(snapshotPath(dir, off)); !os.IsNotExist(err) {
					t.Fatalf("corrupt snapshot %d kept: %v", off, err)
				}
			}
			sameView(t, c.name, viewOf(l), viewOf(replayed(t, dir)))
		})
	}
}

// TestSnapshotsFollowTheLog: snapshots go with the segments retention and log start
// moves delete, all go with TruncateFullyAndStartAt, and a stray one (not at a segment
// base, not the newest) is deleted at load.
func TestSnapshotsFollowTheLog(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	m, l := openManaged(t, data, smallConfig())
	dir := filepath.Join(data, "t-0")
	writeProducers(t, l, 12)
	check := func(what string) {
		t.Helper()
		bases := segmentBases(l)
		for _, off := range snapshotOffsets(t, dir) {
			if off < bases[0] || off > l.LogEndOffset() {
				t.Fatalf("%s: snapshot at %d outside [%d, %d]", what, off, bases[0], l.LogEndOffset())
			}
		}
	}
	if err := l.AdvanceLogStartOffset(segmentBases(l)[2] + 1); err != nil {
		t.Fatal(err)
	}
	check("after AdvanceLogStartOffset")
	cfg := smallConfig()
	cfg.RetentionBytes = 3 * cfg.SegmentBytes
	l.SetConfig(cfg)
	if n, err := l.ApplyRetention(0); err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	check("after retention")
	// A stray snapshot between two bases goes at the next load; the newest stays.
	writeFile(t, snapshotPath(dir, segmentBases(l)[0]+1), []byte("stray"))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	m, l = openManaged(t, data, cfg)
	if got := snapshotOffsets(t, dir); !slices.Equal(got, append(segmentBases(l), leo)) {
		t.Fatalf("snapshots %v after load, want the bases %v (each rolled) and the LEO %d", got, segmentBases(l), leo)
	}
	if err := l.TruncateFullyAndStartAt(5000); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, dir); len(got) != 0 {
		t.Fatalf("snapshots %v after TruncateFullyAndStartAt", got)
	}
	m.Close()
}

// TestSnapshotSkippedForOrphanTransaction: after a MIRROR_PID_RESET an open transaction
// has no producer entry, which Kafka's format cannot hold: no snapshot is written for
// that state, and a reload (from an older snapshot) keeps the transaction open.
func TestSnapshotSkippedForOrphanTransaction(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	m, l := openManaged(t, data, smallConfig())
	dir := filepath.Join(data, "t-0")
	for i := int32(0); i < 30; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{pid: 100, seq: i, valueSize: 100, ts: 4}), 3)
	}
	first := mustAppend(t, l, mkBatch(t, batchOpts{pid: 300, txn: true, ts: 5}), 3).FirstOffset
	if _, err := l.AppendControlAsLeader(record.BuildMirrorPIDReset("src", 3, 6), 3); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ { // rolls, while the transaction is open
		mustAppend(t, l, mkBatch(t, batchOpts{valueSize: 100, ts: 7}), 3)
	}
	leo := l.LogEndOffset()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, off := range snapshotOffsets(t, dir) {
		if off > first {
			t.Fatalf("snapshot at %d written while the orphan transaction at %d was open", off, first)
		}
	}
	m, l = openManaged(t, data, smallConfig())
	if f, ok := l.FirstUnstableOffset(); !ok || f != first || len(l.ProducerEntries()) != 0 {
		t.Fatalf("after reload: first unstable %d %v, producers %v; want %d and none", f, ok, l.ProducerEntries(), first)
	}
	if _, err := l.AppendControlAsLeader(record.BuildEndTxnMarker(record.ControlCommit, 300, 0, 3, 0, 8), 3); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, dir); got[len(got)-1] != leo+1 {
		t.Fatalf("snapshots %v: want one at the LEO %d once the transaction closed", got, leo+1)
	}
}

// TestCleanOpenEqualsRecovery: random logs (leader and follower appends with gaps,
// compressed batches, missing timestamps, transactions, truncations, log start moves)
// opened after a clean shutdown, from indexes and snapshots, have the segment state, the
// offsets, the time lookups and the producer state of the same files recovered in full.
func TestCleanOpenEqualsRecovery(t *testing.T) {
	for seed := int64(1); seed <= 100; seed++ {
		rng := rand.New(rand.NewSource(seed))
		data := filepath.Join(t.TempDir(), "data")
		cfg := smallConfig()
		cfg.SegmentBytes = int64(700 + rng.Intn(2500))
		cfg.IndexIntervalBytes = int32(1 + rng.Intn(400))
		m, l := openManaged(t, data, cfg)
		seq := map[int64]int32{}
		pids := int64(0) // producer IDs after a truncation are new ones: the old sequences are cut
		for step := 0; step < 150; step++ {
			ts := int64(step * 10)
			if rng.Intn(8) == 0 {
				ts = -1
			} else if rng.Intn(5) == 0 {
				ts = int64(rng.Intn(1500)) // out of order
			}
			switch op := rng.Intn(20); {
			case op < 10:
				pid := int64(0)
				if rng.Intn(2) == 0 {
					pid = pids + int64(1+rng.Intn(4))
				}
				n := 1 + rng.Intn(4)
				b := mkBatch(t, batchOpts{n: n, ts: ts, tsStep: int64(rng.Intn(3)), pid: pid, seq: seq[pid],
					valueSize: rng.Intn(150), codec: int8([]int{0, 0, 1, 4}[rng.Intn(4)])})
				if _, err := l.AppendAsLeader(b, 1, -1); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				seq[pid] += int32(n)
			case op < 14:
				base := l.LogEndOffset() + int64(rng.Intn(3))*int64(rng.Intn(40))
				if _, err := l.AppendAsFollower(mkBatch(t, batchOpts{base: base, n: 1 + rng.Intn(3), ts: ts, epoch: 1, valueSize: rng.Intn(80)})); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
			case op < 16:
				pid := pids + int64(10+rng.Intn(2))
				b := mkBatch(t, batchOpts{pid: pid, seq: seq[pid], txn: true, ts: ts})
				if _, err := l.AppendAsLeader(b, 1, -1); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				seq[pid]++
				if rng.Intn(2) == 0 {
					if _, err := l.AppendControlAsLeader(record.BuildEndTxnMarker(int16(rng.Intn(2)), pid, 0, 1, 0, ts), 1); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, step, err)
					}
				}
			case op < 18:
				if leo, start := l.LogEndOffset(), l.LogStartOffset(); leo > start {
					if err := l.TruncateTo(leo - 1 - rng.Int63n(min(leo-start, 30))); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, step, err)
					}
				}
				pids += 100
			default:
				if start, leo := l.LogStartOffset(), l.LogEndOffset(); leo > start {
					if err := l.AdvanceLogStartOffset(start + rng.Int63n(leo-start)); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, step, err)
					}
				}
			}
		}
		epochs, leo := l.EpochEntries(), l.LogEndOffset()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(data, "t-0")
		full := t.TempDir()
		copyDir(t, dir, full)
		_, clean := openManaged(t, data, cfg)
		rec, err := openLog(full, [16]byte{7}, cfg, quietLogger(), -1, clean.LogStartOffset(), -1) // recovered in full
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Close()
		compareLogs(t, seed, clean, rec)
		// The epoch cache is the one the log had, from the log start (a full recovery
		// derives it from the batches again, those below the log start included) —
		// unless a truncation into a gap had left the LEO past the data, which an open
		// recomputes.
		want := epochCache{entries: epochs}
		want.truncateFromStart(clean.LogStartOffset())
		if got := clean.EpochEntries(); clean.LogEndOffset() == leo && !slices.Equal(got, want.entries) {
			t.Fatalf("seed %d: epochs %v after a clean restart, %v before (log start %d)", seed, got, epochs, clean.LogStartOffset())
		}
		// Truncations reload from the snapshots left.
		for k := 0; k < 3 && clean.LogEndOffset() > clean.LogStartOffset(); k++ {
			if err := clean.TruncateTo(clean.LogStartOffset() + rng.Int63n(clean.LogEndOffset()-clean.LogStartOffset())); err != nil {
				t.Fatal(err)
			}
			sameView(t, fmt.Sprint("seed ", seed, " truncation ", k), viewOf(clean), viewOf(replayedAt(t, dir, clean.LogStartOffset())))
		}
	}
}

func compareLogs(t *testing.T, seed int64, a, b *Log) {
	t.Helper()
	if a.LogStartOffset() != b.LogStartOffset() || a.LogEndOffset() != b.LogEndOffset() || len(a.segs) != len(b.segs) {
		t.Fatalf("seed %d: start %d/%d LEO %d/%d segments %d/%d", seed, a.LogStartOffset(), b.LogStartOffset(),
			a.LogEndOffset(), b.LogEndOffset(), len(a.segs), len(b.segs))
	}
	for i := range a.segs {
		x, y := a.segs[i], b.segs[i]
		gx := fmt.Sprint(x.base, x.nextOffset, x.firstBatchTs, x.maxTs, x.maxTsPos, x.maxTsBatchEnd, x.size.Load())
		gy := fmt.Sprint(y.base, y.nextOffset, y.firstBatchTs, y.maxTs, y.maxTsPos, y.maxTsBatchEnd, y.size.Load())
		if i == len(a.segs)-1 {
			gx, gy = gx+fmt.Sprint(" ", x.bytesSinceIndex), gy+fmt.Sprint(" ", y.bytesSinceIndex)
		}
		if gx != gy {
			t.Fatalf("seed %d: segment %d (base next firstTs maxTs maxTsPos maxTsEnd size [sinceIndex]): %s, recovered %s", seed, i, gx, gy)
		}
	}
	if o, ts := a.MaxTimestamp(); fmt.Sprint(o, ts) != fmt.Sprint(b.MaxTimestamp()) {
		t.Fatalf("seed %d: MaxTimestamp %d %d, recovered %v", seed, o, ts, fmt.Sprint(b.MaxTimestamp()))
	}
	for _, ts := range []int64{-1, 0, 5, 500, 1490, 2000} {
		o1, t1, f1, e1 := a.OffsetForTimestamp(ts)
		o2, t2, f2, e2 := b.OffsetForTimestamp(ts)
		if o1 != o2 || t1 != t2 || f1 != f2 || (e1 == nil) != (e2 == nil) {
			t.Fatalf("seed %d: OffsetForTimestamp(%d) %d %d %v %v, recovered %d %d %v %v", seed, ts, o1, t1, f1, e1, o2, t2, f2, e2)
		}
	}
	sameView(t, fmt.Sprint("seed ", seed), viewOf(a), viewOf(b))
}
