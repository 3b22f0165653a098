package storage

import "testing"

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
	// emptied and restarted elsewhere (a jump to the source log start): still 11
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if l.LeaderEpoch() != 11 || l.LatestEpoch() != -1 {
		t.Fatalf("after a full truncation: leader epoch %d, latest batch epoch %d", l.LeaderEpoch(), l.LatestEpoch())
	}
}
