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

// TestAppendAsCoordinator: a coordinator's transactional batches (base sequence 0 each,
// as Kafka's group coordinator writes them) are never taken for duplicates nor refused
// for their sequence, also at a new producer epoch; an older epoch is fenced; the
// marker closes the transaction they opened.
func TestAppendAsCoordinator(t *testing.T) {
	l := openT(t, t.TempDir(), DefaultConfig())
	defer l.Close()
	txnBatch := func(epoch int16) record.Batch {
		return record.Build(record.BatchHeader{Attributes: record.TransactionalBit, ProducerID: 9, ProducerEpoch: epoch, BaseSequence: 0},
			[]record.KV{{Key: []byte("k"), Value: []byte("v")}})
	}
	var offs []int64
	for _, e := range []int16{0, 0, 2} {
		info, err := l.AppendAsCoordinator(txnBatch(e), 0)
		if err != nil || info.Duplicate {
			t.Fatalf("epoch %d: %+v %v", e, info, err)
		}
		offs = append(offs, info.FirstOffset)
	}
	if offs[0] != 0 || offs[1] != 1 || offs[2] != 2 {
		t.Fatalf("offsets %v", offs)
	}
	if _, err := l.AppendAsCoordinator(txnBatch(1), 0); !isErr(err, ErrInvalidProducerEpoch) {
		t.Fatalf("older epoch: %v", err)
	}
	if o := l.OpenTransactions(); len(o) != 1 || o[0].FirstOffset != 0 {
		t.Fatalf("open transactions %+v", o)
	}
	if _, err := l.AppendControlAsLeader(record.BuildEndTxnMarker(record.ControlCommit, 9, 2, 0, 5, 0), 0); err != nil {
		t.Fatal(err)
	}
	if o := l.OpenTransactions(); len(o) != 0 {
		t.Fatalf("open transactions after the marker %+v", o)
	}
}
