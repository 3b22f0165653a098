package storage

import (
	"errors"
	"fmt"
	"testing"
)

// TestTruncateToFencedIsAtomic: a reader that finds its offset past a fenced truncation
// (OFFSET_OUT_OF_RANGE) always sees the raised leader epoch afterwards, so the broker can
// answer FENCED_LEADER_EPOCH instead; the dropped epoch then ends at the new LEO (what
// OffsetForLeaderEpoch answers a consumer that read the tail).
func TestTruncateToFencedIsAtomic(t *testing.T) {
	l := openT(t, t.TempDir(), smallConfig())
	defer l.Close()
	epoch := int32(0)
	for round := 0; round < 50; round++ {
		for i := 0; i < 5; i++ {
			mustAppend(t, l, mkBatch(t, batchOpts{ts: 1000, valueSize: 300}), epoch)
		}
		leo := l.LogEndOffset()
		target := leo - 3
		stop, done := make(chan struct{}), make(chan string, 1)
		go func() {
			for {
				select {
				case <-stop:
					done <- ""
					return
				default:
				}
				r, err := l.ReadRange(leo-1, 1<<20, leo, true)
				if err == nil {
					r.Release()
				} else if errors.Is(err, ErrOffsetOutOfRange) && l.LeaderEpoch() <= epoch {
					done <- fmt.Sprintf("round %d: offset %d out of range while the leader epoch is still %d", round, leo-1, l.LeaderEpoch())
					return
				}
			}
		}()
		if err := l.TruncateToFenced(target); err != nil {
			t.Fatal(err)
		}
		close(stop)
		if msg := <-done; msg != "" {
			t.Fatal(msg)
		}
		if got := l.LeaderEpoch(); got != epoch+1 {
			t.Fatalf("round %d: leader epoch %d after the fenced truncation, want %d", round, got, epoch+1)
		}
		if e, end := l.EndOffsetForEpoch(epoch); e != epoch || end != target {
			t.Fatalf("round %d: EndOffsetForEpoch(%d) = %d, %d; want %d, %d", round, epoch, e, end, epoch, target)
		}
		epoch++
	}
	// below the log start: emptied, restarted there, fenced the same way
	if err := l.AdvanceLogStartOffset(l.LogEndOffset() - 1); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateToFenced(0); err != nil {
		t.Fatal(err)
	}
	if got := l.LeaderEpoch(); got != epoch+1 || l.LogEndOffset() != 0 {
		t.Fatalf("full truncation: epoch %d LEO %d, want epoch %d LEO 0", got, l.LogEndOffset(), epoch+1)
	}
}
