package storage

import (
	"testing"

	"github.com/kmirror/kmirror/internal/record"
)

// TestEmptiedMarkerClosesTransaction: a mirror copied a transaction's batches while it was
// open on the source; the source aborted it and its cleaner then emptied the marker (all
// of the transaction's batches cleaned away) before the mirror fetched it. The emptied
// control batch closes the transaction as aborted — the LSO reaches the LEO and the
// batches are listed as aborted for read_committed fetches — instead of holding the LSO
// back for good. The same holds after a restart (producer state rebuilt from the log).
func TestEmptiedMarkerClosesTransaction(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, DefaultConfig())
	txn := mkBatch(t, batchOpts{base: 0, n: 5, pid: 7, pepoch: 1, txn: true})
	if _, err := l.AppendAsFollower(txn); err != nil {
		t.Fatal(err)
	}
	if f, open := l.FirstUnstableOffset(); !open || f != 0 {
		t.Fatalf("open transaction: first unstable offset %d %v", f, open)
	}
	emptied := record.Build(record.BatchHeader{BaseOffset: 5, Attributes: record.ControlBit | record.TransactionalBit,
		Timestamp: 1, ProducerID: 7, ProducerEpoch: 1, BaseSequence: -1}, nil)
	if _, err := l.AppendAsFollower(emptied); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		if f, open := l.FirstUnstableOffset(); open {
			t.Fatalf("%s: transaction still open at %d", what, f)
		}
		if hw, lso := l.HighWatermarkAndLSO(); lso != hw || hw != 6 {
			t.Fatalf("%s: HW %d LSO %d, want 6 and 6", what, hw, lso)
		}
		if got := l.AbortedTransactions(0, 6); len(got) != 1 || got[0].ProducerID != 7 || got[0].FirstOffset != 0 {
			t.Fatalf("%s: aborted transactions %+v, want producer 7 from offset 0", what, got)
		}
	}
	check("after the append")
	l.Close()
	l = openT(t, dir, DefaultConfig())
	defer l.Close()
	check("after a restart")
}
