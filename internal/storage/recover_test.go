package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestEpochCache(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, DefaultConfig())
	if l.LatestEpoch() != -1 {
		t.Fatal("empty cache")
	}
	// empty: leader epoch 0 ends at the LEO (a Kafka leader's cache holds its epoch)
	if e, o := l.EndOffsetForEpoch(0); e != 0 || o != 0 {
		t.Fatalf("empty: %d %d", e, o)
	}
	if e, o := l.EndOffsetForEpoch(1); e != -1 || o != -1 {
		t.Fatalf("empty, epoch 1: %d %d", e, o)
	}
	for i := 0; i < 4; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 5}), 2) // 0..19 epoch 2
	}
	for i := 0; i < 2; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 5}), 4) // 20..29 epoch 4
	}
	// Epoch raises without records: 6 at 30 then 7 at 30 replaces 6; fences, not cache
	// entries (spec section 6: the cache follows the batch epochs).
	for _, e := range []int32{6, 7, 5} {
		if err := l.RaiseLeaderEpoch(e); err != nil {
			t.Fatal(err)
		}
	}
	if l.LatestEpoch() != 4 || l.LeaderEpoch() != 7 {
		t.Fatalf("after raises: latest batch epoch %d, leader epoch %d; want 4 and 7", l.LatestEpoch(), l.LeaderEpoch())
	}
	wantEntries := []EpochEntry{{2, 0}, {4, 20}}
	check := func(l *Log) {
		t.Helper()
		got := l.EpochEntries()
		if len(got) != len(wantEntries) {
			t.Fatalf("entries %v", got)
		}
		for i := range got {
			if got[i] != wantEntries[i] {
				t.Fatalf("entries %v", got)
			}
		}
		for _, c := range []struct {
			req int32
			e   int32
			o   int64
		}{
			{1, 1, 0},   // below the earliest: requested epoch, first start offset (Kafka)
			{2, 2, 20},  //
			{3, 2, 20},  // unknown in between: largest below
			{4, 4, 30},  // latest batch epoch: LEO
			{6, 4, 30},  // raised over: history in it ended at the raise
			{7, 7, 30},  // the leader epoch: LEO
			{8, -1, -1}, // above the leader epoch
			{-1, -1, -1},
		} {
			if e, o := l.EndOffsetForEpoch(c.req); e != c.e || o != c.o {
				t.Fatalf("EndOffsetForEpoch(%d) = %d %d, want %d %d", c.req, e, o, c.e, c.o)
			}
		}
		for _, c := range [][2]int64{{0, 2}, {19, 2}, {20, 4}, {29, 4}, {30, 4}, {1000, 4}} {
			if e := l.EpochForOffset(c[0]); int64(e) != c[1] {
				t.Fatalf("EpochForOffset(%d) = %d, want %d", c[0], e, c[1])
			}
		}
	}
	check(l)
	for name, want := range map[string]string{"leader-epoch-checkpoint": "0\n2\n2 0\n4 20\n", "leader-epoch-fences": "0\n1\n7 30\n"} {
		if data, _ := os.ReadFile(filepath.Join(dir, name)); string(data) != want {
			t.Fatalf("%s %q, want %q", name, data, want)
		}
	}
	l.Close()
	// The raise survives a restart.
	l = openT(t, dir, DefaultConfig())
	check(l)
	if l.LeaderEpoch() != 7 {
		t.Fatalf("leader epoch after a restart: %d", l.LeaderEpoch())
	}
	// Appending at epoch 7 adds the cache entry; epoch 9 batch adds one.
	mustAppend(t, l, mkBatch(t, batchOpts{}), 7)
	mustAppend(t, l, mkBatch(t, batchOpts{}), 9)
	wantEntries = append(wantEntries, EpochEntry{7, 30}, EpochEntry{9, 31})
	// Truncation removes entries at or after the new LEO and keeps the leader epoch.
	if err := l.TruncateTo(31); err != nil {
		t.Fatal(err)
	}
	wantEntries = wantEntries[:3]
	if e, o := l.EndOffsetForEpoch(7); e != 7 || o != 31 {
		t.Fatalf("after truncate: %d %d", e, o)
	}
	if l.LeaderEpoch() != 9 {
		t.Fatalf("truncation lowered the leader epoch to %d", l.LeaderEpoch())
	}
	if err := l.TruncateTo(25); err != nil {
		t.Fatal(err)
	}
	wantEntries = wantEntries[:2]
	if e, o := l.EndOffsetForEpoch(4); e != 4 || o != 25 {
		t.Fatalf("after truncate: %d %d", e, o)
	}
	// epochs 7 and 9, truncated: their history ended at 25 at the latest
	if e, o := l.EndOffsetForEpoch(7); e != 4 || o != 25 {
		t.Fatalf("truncated epoch 7 after truncate: %d %d", e, o)
	}
	// epoch 9, the leader epoch, had a batch (dropped): the truncation point too
	if e, o := l.EndOffsetForEpoch(9); e != 4 || o != 25 || l.LeaderEpoch() != 9 {
		t.Fatalf("leader epoch %d, epoch 9 after truncate: %d %d", l.LeaderEpoch(), e, o)
	}
	l.Close()
	// A lost checkpoint is rebuilt from the batches' epochs.
	os.Remove(filepath.Join(dir, "leader-epoch-checkpoint"))
	l = openT(t, dir, DefaultConfig())
	defer l.Close()
	check2 := l.EpochEntries()
	if len(check2) != 2 || check2[1] != (EpochEntry{4, 20}) {
		t.Fatalf("rebuilt %v", check2)
	}
	if _, err := os.Stat(filepath.Join(dir, "leader-epoch-checkpoint")); err != nil {
		t.Fatalf("checkpoint not rewritten: %v", err)
	}
}

func fillLog(t *testing.T, dir string, n int) (*Log, [][]byte) {
	t.Helper()
	l := openT(t, dir, smallConfig())
	var bs [][]byte
	for i := 0; i < n; i++ {
		b := mkBatch(t, batchOpts{n: 2, valueSize: 40, ts: int64(i)})
		mustAppend(t, l, b, 1)
		bs = append(bs, append([]byte(nil), b...))
	}
	return l, bs
}

func TestRecoverCutTail(t *testing.T) {
	dir := t.TempDir()
	l, bs := fillLog(t, dir, 40)
	l.Close()
	segs := segmentFiles(t, dir, ".log")
	last := segs[len(segs)-1]
	st, _ := os.Stat(last)
	if err := os.Truncate(last, st.Size()-7); err != nil {
		t.Fatal(err)
	}
	logger, lb := newLogger()
	l, err := Open(dir, [16]byte{1}, smallConfig(), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := readAllBatches(t, l)
	if len(got) != len(bs)-1 || l.LogEndOffset() != int64(2*(len(bs)-1)) {
		t.Fatalf("recovered %d batches, LEO %d", len(got), l.LogEndOffset())
	}
	out := lb.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "cutting corrupt log tail") ||
		!strings.Contains(out, filepath.Base(last)) || !strings.Contains(out, "torn batch") {
		t.Fatalf("log output %q", out)
	}
	// Appending continues where the valid data ended.
	if info := mustAppend(t, l, mkBatch(t, batchOpts{}), 1); info.FirstOffset != int64(2*(len(bs)-1)) {
		t.Fatalf("append at %d", info.FirstOffset)
	}
}

func TestRecoverFlippedByte(t *testing.T) {
	dir := t.TempDir()
	l, bs := fillLog(t, dir, 40)
	l.Close()
	segs := segmentFiles(t, dir, ".log")
	if len(segs) < 3 {
		t.Fatalf("want several segments")
	}
	// Flip a byte inside the second batch of the second segment.
	data, _ := os.ReadFile(segs[1])
	first := len(bs[0])
	data[first+record0Payload] ^= 0x40
	os.WriteFile(segs[1], data, 0o644)
	logger, lb := newLogger()
	l, err := Open(dir, [16]byte{1}, smallConfig(), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := readAllBatches(t, l)
	base := segmentBase(t, segs[1])
	if l.LogEndOffset() != base+2 {
		t.Fatalf("LEO %d, want %d", l.LogEndOffset(), base+2)
	}
	for i, b := range got {
		if !bytes.Equal(b, bs[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	if n := len(segmentFiles(t, dir, ".log")); n != 2 {
		t.Fatalf("%d segments left, want 2", n)
	}
	out := lb.String()
	if !strings.Contains(out, "CRC") || !strings.Contains(out, "deleting segment after a corrupt one") ||
		!strings.Contains(out, "position="+strconv.Itoa(first)) {
		t.Fatalf("log output %q", out)
	}
}

// record0Payload is a byte position inside a test batch's records.
const record0Payload = 70

func segmentBase(t *testing.T, path string) int64 {
	t.Helper()
	var base int64
	for _, c := range strings.TrimSuffix(filepath.Base(path), ".log") {
		base = base*10 + int64(c-'0')
	}
	return base
}

func TestRecoverDamagedIndex(t *testing.T) {
	dir := t.TempDir()
	l, bs := fillLog(t, dir, 40)
	l.Close()
	for _, f := range segmentFiles(t, dir, ".index") {
		os.WriteFile(f, []byte{1, 2, 3}, 0o644) // partial entry
	}
	os.Remove(segmentFiles(t, dir, ".timeindex")[0])
	l = openT(t, dir, smallConfig())
	defer l.Close()
	if got := readAllBatches(t, l); len(got) != len(bs) {
		t.Fatalf("read %d", len(got))
	}
	for _, f := range segmentFiles(t, dir, ".index") {
		st, _ := os.Stat(f)
		if st.Size()%8 != 0 {
			t.Fatalf("%s not rebuilt", f)
		}
	}
}
