package storage

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRaisedEpochKeepsBatchEpochAnswers (spec section 6, the leader-epoch cache of a mirror
// partition follows the batch epochs): a mirror partition fails over (leader epoch raised
// to 10, local writes at 10), is re-attached to its source (its own writes truncated,
// fenced to 11) and mirrors batches of source epoch 0 and then 1 again. The cache holds
// only batch epochs, so OffsetForLeaderEpoch answers for the mirrored epochs end where
// their batches end — a consumer or a downstream mirror that read them sees no
// truncation — while a consumer of the truncated local writes (epoch 10) is sent to the
// truncation point. All of it survives a restart.
func TestRaisedEpochKeepsBatchEpochAnswers(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, DefaultConfig())
	follow := func(base int64, epoch int32) {
		t.Helper()
		if _, err := l.AppendAsFollower(mkBatch(t, batchOpts{base: base, n: 5, epoch: epoch})); err != nil {
			t.Fatal(err)
		}
	}
	follow(0, 0) // 0..4 mirrored, source epoch 0
	follow(5, 0) // 5..9
	// failover: raised to 10, two local batches at 10
	if err := l.RaiseLeaderEpoch(10); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, mkBatch(t, batchOpts{n: 5}), l.LeaderEpoch()) // 10..14
	// re-attach: back to the last mirror position 10, fenced
	if err := l.TruncateToFenced(10); err != nil {
		t.Fatal(err)
	}
	if l.LeaderEpoch() != 11 || l.LatestEpoch() != 0 {
		t.Fatalf("after the re-attach truncation: leader epoch %d, latest batch epoch %d; want 11 and 0", l.LeaderEpoch(), l.LatestEpoch())
	}
	follow(10, 0) // 10..14, source epoch 0 again
	follow(15, 1) // 15..19, source epoch 1
	check := func(what string) {
		t.Helper()
		for _, c := range []struct {
			req int32
			e   int32
			o   int64
		}{
			{0, 0, 15},  // mirrored epoch 0 ends where epoch 1 starts, not at the raise
			{1, 1, 20},  // latest batch epoch: LEO
			{10, 0, 10}, // the truncated local writes: the truncation point
			{11, 11, 20},
			{12, -1, -1},
		} {
			if e, o := l.EndOffsetForEpoch(c.req); e != c.e || o != c.o {
				t.Fatalf("%s: EndOffsetForEpoch(%d) = %d %d, want %d %d", what, c.req, e, o, c.e, c.o)
			}
		}
		got := l.EpochEntries()
		if len(got) != 2 || got[0] != (EpochEntry{0, 0}) || got[1] != (EpochEntry{1, 15}) {
			t.Fatalf("%s: cache %v, want the batch epochs [{0 0} {1 15}]", what, got)
		}
		if l.LeaderEpoch() != 11 {
			t.Fatalf("%s: leader epoch %d, want 11", what, l.LeaderEpoch())
		}
	}
	check("mirroring")
	l.Close()
	l = openT(t, dir, DefaultConfig())
	defer l.Close()
	check("after a restart")

	// the source moves on to epoch 2, then diverges: the mirror truncates to 20 (fenced)
	follow(20, 2) // 20..24
	if err := l.TruncateToFenced(20); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req int32
		e   int32
		o   int64
	}{
		{2, 1, 20},  // dropped: the truncation point, not an older raise
		{1, 1, 20},  // the latest batch epoch again: LEO
		{10, 0, 10}, // still the first truncation point
		{0, 0, 15},
	} {
		if e, o := l.EndOffsetForEpoch(c.req); e != c.e || o != c.o {
			t.Fatalf("after the second truncation: EndOffsetForEpoch(%d) = %d %d, want %d %d", c.req, e, o, c.e, c.o)
		}
	}
	// retention passes the first truncation point: epoch 1 keeps Kafka's answer, and
	// the truncated local epoch 10 points at the log start (nothing earlier is left)
	if err := l.AdvanceLogStartOffset(17); err != nil {
		t.Fatal(err)
	}
	if e, o := l.EndOffsetForEpoch(1); e != 1 || o != 20 {
		t.Fatalf("after the log start moved: EndOffsetForEpoch(1) = %d %d, want 1 20", e, o)
	}
	if e, o := l.EndOffsetForEpoch(10); o != 17 {
		t.Fatalf("after the log start moved: EndOffsetForEpoch(10) = %d %d, want the log start 17", e, o)
	}
	// emptied and restarted elsewhere (a jump to the source log start): still 12
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if l.LeaderEpoch() != 12 || l.LatestEpoch() != -1 {
		t.Fatalf("after a full truncation: leader epoch %d, latest batch epoch %d", l.LeaderEpoch(), l.LatestEpoch())
	}
}

// TestTruncationSurvivesCrash: a process killed in the middle of a fenced truncation,
// after the segment was cut but before the leader-epoch checkpoint was rewritten, restarts
// with the raise and the dropped epoch on record (they are written first) and without
// the stale cache entry at the LEO (Kafka's recovery rule), so consumers of the dropped
// writes are still sent to the truncation point and mirrored epochs answer exactly.
func TestTruncationSurvivesCrash(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, DefaultConfig())
	if _, err := l.AppendAsFollower(mkBatch(t, batchOpts{base: 0, n: 10, epoch: 0})); err != nil {
		t.Fatal(err)
	}
	if err := l.RaiseLeaderEpoch(10); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, mkBatch(t, batchOpts{n: 5}), 10) // 10..14, local writes
	checkpoint := filepath.Join(dir, "leader-epoch-checkpoint")
	before, err := os.ReadFile(checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateToFenced(10); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// the crash: the checkpoint rewrite never happened
	if err := os.WriteFile(checkpoint, before, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, DefaultConfig())
	defer l.Close()
	if l.LeaderEpoch() != 11 || l.LatestEpoch() != 0 {
		t.Fatalf("after the crash: leader epoch %d, latest batch epoch %d; want 11 and 0", l.LeaderEpoch(), l.LatestEpoch())
	}
	if _, err := l.AppendAsFollower(mkBatch(t, batchOpts{base: 10, n: 5, epoch: 0})); err != nil {
		t.Fatal(err)
	}
	if e, o := l.EndOffsetForEpoch(0); e != 0 || o != 15 {
		t.Fatalf("mirrored epoch 0: %d %d, want 0 15", e, o)
	}
	if e, o := l.EndOffsetForEpoch(10); e != 0 || o != 10 {
		t.Fatalf("dropped epoch 10: %d %d, want 0 10", e, o)
	}
}

// TestEmptiedLogKeepsEpochsAcrossRestart: a mirror log whose source deleted every record
// (log start moved up to the LEO) keeps its newest batch epoch and its leader epoch over
// a restart: the cache entry re-based at the log start of the empty log is not taken for
// a stale one, so consumers fetching with that epoch are not answered
// UNKNOWN_LEADER_EPOCH and a failover still raises above it.
func TestEmptiedLogKeepsEpochsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, DefaultConfig())
	if err := l.RaiseLeaderEpoch(2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsFollower(mkBatch(t, batchOpts{base: 0, n: 10, epoch: 11})); err != nil {
		t.Fatal(err)
	}
	if err := l.AdvanceLogStartOffset(10); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openT(t, dir, DefaultConfig())
	defer l.Close()
	if l.LatestEpoch() != 11 || l.LeaderEpoch() != 11 {
		t.Fatalf("after a restart: latest batch epoch %d, leader epoch %d; want 11 and 11", l.LatestEpoch(), l.LeaderEpoch())
	}
	if e, o := l.EndOffsetForEpoch(11); e != 11 || o != 10 {
		t.Fatalf("EndOffsetForEpoch(11) = %d %d, want 11 10", e, o)
	}
}

// TestReusedEpochForgetsOldTruncationPoint: the source's batches come to carry the number
// of an epoch whose local batches a truncation dropped earlier; when those batches are
// dropped in turn, the answer is their own truncation point, not the old one far back.
func TestReusedEpochForgetsOldTruncationPoint(t *testing.T) {
	l := openT(t, t.TempDir(), DefaultConfig())
	defer l.Close()
	if _, err := l.AppendAsFollower(mkBatch(t, batchOpts{base: 0, n: 10, epoch: 0})); err != nil {
		t.Fatal(err)
	}
	if err := l.RaiseLeaderEpoch(10); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, mkBatch(t, batchOpts{n: 5}), 10) // 10..14, local
	if err := l.TruncateToFenced(10); err != nil {    // epoch 10 dropped at 10
		t.Fatal(err)
	}
	if _, err := l.AppendAsFollower(mkBatch(t, batchOpts{base: 10, n: 20, epoch: 0})); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsFollower(mkBatch(t, batchOpts{base: 30, n: 10, epoch: 10})); err != nil { // source epoch 10
		t.Fatal(err)
	}
	if err := l.TruncateToFenced(30); err != nil { // the source's epoch-10 batches dropped at 30
		t.Fatal(err)
	}
	if e, o := l.EndOffsetForEpoch(10); e != 0 || o != 30 {
		t.Fatalf("EndOffsetForEpoch(10) = %d %d, want 0 30 (not the old point 10)", e, o)
	}
}
