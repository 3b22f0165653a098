package storage

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

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

func producerIDs(l *Log) []int64 {
	var out []int64
	for _, e := range l.ProducerEntries() {
		out = append(out, e.ProducerID)
	}
	return out
}

// TestRemoveExpiredProducers: a producer whose last batch is producer.id.expiration.ms
// old or older is removed (its next batch then starts as a new producer's, any
// sequence), one in an open transaction is not until the transaction ends; the removal
// survives a clean restart (the snapshot Close writes), and the Manager runs it every
// producer.id.expiration.check.interval.ms.
func TestRemoveExpiredProducers(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	m, l := openManaged(t, data, smallConfig())
	const exp = 5000
	mustAppend(t, l, mkBatch(t, batchOpts{pid: 1, seq: 0, n: 3, ts: 1000}), 0)    // idle
	mustAppend(t, l, mkBatch(t, batchOpts{pid: 2, seq: 0, ts: 5001}), 0)          // idle for exactly exp
	mustAppend(t, l, mkBatch(t, batchOpts{pid: 3, seq: 0, ts: 9000}), 0)          // recent
	mustAppend(t, l, mkBatch(t, batchOpts{pid: 4, seq: 0, txn: true, ts: 10}), 0) // old, in a transaction
	if n := l.RemoveExpiredProducers(10001, exp); n != 2 || !slices.Equal(producerIDs(l), []int64{3, 4}) {
		t.Fatalf("removed %d, left %v; want 2 removed, 3 and 4 left", n, producerIDs(l))
	}
	// Producer 1 is unknown now: sequence 40 is accepted (it would be out of order).
	mustAppend(t, l, mkBatch(t, batchOpts{pid: 1, seq: 40, ts: 10002}), 0)
	if _, err := l.AppendControlAsLeader(record.BuildEndTxnMarker(record.ControlCommit, 4, 0, 0, 0, 20), 0); err != nil {
		t.Fatal(err)
	}
	if n := l.RemoveExpiredProducers(10001, exp); n != 1 || !slices.Equal(producerIDs(l), []int64{1, 3}) {
		t.Fatalf("removed %d, left %v; want producer 4 gone with its transaction over", n, producerIDs(l))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, l = openManaged(t, data, smallConfig())
	if !slices.Equal(producerIDs(l), []int64{1, 3}) {
		t.Fatalf("after a clean restart: %v", producerIDs(l))
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		m.RunBackground(ctx, BackgroundConfig{ProducerExpirationCheckMs: 1, ProducerExpirationMs: 1})
		close(done)
	}()
	for deadline := time.Now().Add(10 * time.Second); len(l.ProducerEntries()) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the background check left %v", producerIDs(l))
		}
	}
	cancel()
	<-done
}
