package txn

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/kafka"
)

// TestTxnElectionAndResignation: a transactional ID of a partition never elected gets
// NOT_COORDINATOR; while its partition loads, COORDINATOR_LOAD_IN_PROGRESS (and
// ListTransactions the error), while another partition is served; once loaded it is
// served. A resignation answers NOT_COORDINATOR; elections not newer than it are
// ignored; a newer one loads the state as written, and its markers carry the new leader
// epoch as the coordinator epoch.
func TestTxnElectionAndResignation(t *testing.T) {
	e := newEnv(t, t.TempDir())
	e.start(false, 0)
	c := e.txns
	id, other := idOn("tx", 1), idOn("other", 2)
	_, _, err := c.InitProducerID(id, 60000, -1, -1)
	wantKerr(t, "InitProducerId, never elected", err, kerr.NotCoordinator)
	if d := c.Describe(id); d.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("Describe, never elected: %v", kerr.ErrorForCode(d.ErrorCode))
	}

	release := e.hold(1)
	defer release()
	c.OnElection(1, 3)
	_, _, err = c.InitProducerID(id, 60000, -1, -1)
	wantKerr(t, "InitProducerId while loading", err, kerr.CoordinatorLoadInProgress)
	wantKerr(t, "EndTxn while loading", c.EndTxn(id, 1, 0, true), kerr.CoordinatorLoadInProgress)
	if r := c.List(kmsg.NewPtrListTransactionsRequest(), 0); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("ListTransactions while loading: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.OnElection(2, 3)
	eventually(t, "partition 2 served while partition 1 loads", func() bool {
		_, _, err := c.InitProducerID(other, 60000, -1, -1)
		if err != nil && err != kerr.CoordinatorLoadInProgress {
			t.Fatal(err)
		}
		return err == nil
	})
	_, _, err = c.InitProducerID(id, 60000, -1, -1)
	wantKerr(t, "InitProducerId, partition 1 still loading", err, kerr.CoordinatorLoadInProgress)
	release()
	if err := c.AwaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid, epoch := mustInit(t, c, id)

	wantKerr(t, "AddPartitions", c.AddPartitions(id, pid, epoch, []kafka.TopicPartition{{Topic: "data", Partition: 0}}), nil)
	c.OnResignation(1, 4)
	wantKerr(t, "EndTxn after resignation", c.EndTxn(id, pid, epoch, true), kerr.NotCoordinator)
	if d := c.Describe(id); d.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("Describe after resignation: %v", kerr.ErrorForCode(d.ErrorCode))
	}
	c.OnElection(1, 3)
	c.OnElection(1, 4)
	_, _, err = c.InitProducerID(id, 60000, -1, -1)
	wantKerr(t, "InitProducerId after stale elections", err, kerr.NotCoordinator)
	c.OnElection(1, 5)
	if err := c.AwaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := c.Describe(id); d.ErrorCode != 0 || d.State != "Ongoing" || d.ProducerID != pid || len(d.Topics) != 1 {
		t.Fatalf("Describe after re-election: %+v", d)
	}
	wantKerr(t, "EndTxn after re-election", c.EndTxn(id, pid, epoch, true), nil)
	if d := c.Describe(id); d.State != "CompleteCommit" {
		t.Fatalf("state after EndTxn: %s", d.State)
	}
	if ce, ok := markerEpoch(e, "data", 0, pid); !ok || ce != 5 {
		t.Fatalf("marker coordinator epoch %d (found %v), want the leader epoch 5", ce, ok)
	}
	c.OnResignation(1, 4) // stale
	if d := c.Describe(id); d.ErrorCode != 0 {
		t.Fatalf("Describe after a stale resignation: %v", kerr.ErrorForCode(d.ErrorCode))
	}
	// A newer election while loaded reloads the partition at the new coordinator epoch.
	c.OnElection(1, 6)
	if err := c.AwaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := c.Describe(id); d.ErrorCode != 0 || d.State != "CompleteCommit" {
		t.Fatalf("Describe after a reload: %+v", d)
	}
	wantKerr(t, "AddPartitions after the reload", c.AddPartitions(id, pid, epoch, []kafka.TopicPartition{{Topic: "data", Partition: 1}}), nil)
	wantKerr(t, "EndTxn after the reload", c.EndTxn(id, pid, epoch, false), nil)
	if ce, ok := markerEpoch(e, "data", 1, pid); !ok || ce != 6 {
		t.Fatalf("marker coordinator epoch %d (found %v) after the reload, want 6", ce, ok)
	}
}

// TestTxnPreparedCompletedAtLoad: a transaction left PrepareCommit (its markers failed)
// is completed by the load of its partition after a restart: markers written, state
// CompleteCommit.
func TestTxnPreparedCompletedAtLoad(t *testing.T) {
	e := newEnv(t, t.TempDir())
	e.start(true, 0)
	id := idOn("prep", 0)
	pid, epoch := mustInit(t, e.txns, id)
	wantKerr(t, "AddPartitions", e.txns.AddPartitions(id, pid, epoch, []kafka.TopicPartition{{Topic: "data", Partition: 0}}), nil)
	e.failMarkers.Store(true)
	wantKerr(t, "EndTxn", e.txns.EndTxn(id, pid, epoch, true), nil)
	if d := e.txns.Describe(id); d.State != "PrepareCommit" {
		t.Fatalf("state with failing markers: %s", d.State)
	}
	e.failMarkers.Store(false)
	e.restart()
	if d := e.txns.Describe(id); d.State != "CompleteCommit" {
		t.Fatalf("state after the load: %s", d.State)
	}
	if _, ok := markerEpoch(e, "data", 0, pid); !ok || len(e.log("data", 0).OpenTransactions()) != 0 {
		t.Fatal("no marker written to data-0")
	}
}

// TestTxnOffsetsSurviveRestart: TxnOffsetCommit offsets are written to
// __consumer_offsets pending; across a restart the transaction stays Ongoing with them
// pending, and EndTxn(commit) afterwards writes the COMMIT marker to the group's
// partition, which makes them the group's committed offsets; an aborted transaction's
// offsets are dropped. Without AddOffsetsToTxn a TxnOffsetCommit gets INVALID_TXN_STATE.
func TestTxnOffsetsSurviveRestart(t *testing.T) {
	e := newEnv(t, t.TempDir())
	e.start(true, 0)
	id, g := idOn("eos", 0), "consumers"
	pid, epoch := mustInit(t, e.txns, id)
	if code := e.txnOffsetCommit(id, pid, epoch, g, "in", 0, 5); code != kerr.InvalidTxnState.Code {
		t.Fatalf("TxnOffsetCommit without AddOffsetsToTxn: %v", kerr.ErrorForCode(code))
	}
	wantKerr(t, "AddOffsets", e.txns.AddOffsets(id, pid, epoch, g), nil)
	if code := e.txnOffsetCommit(id, pid, epoch, g, "in", 0, 5); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	wantKerr(t, "EndTxn commit", e.txns.EndTxn(id, pid, epoch, true), nil)
	if got := e.committed(g, "in", 0); got != 5 {
		t.Fatalf("committed %d, want 5", got)
	}

	wantKerr(t, "AddOffsets", e.txns.AddOffsets(id, pid, epoch, g), nil)
	if code := e.txnOffsetCommit(id, pid, epoch, g, "in", 0, 9); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	wantKerr(t, "EndTxn abort", e.txns.EndTxn(id, pid, epoch, false), nil)
	if got := e.committed(g, "in", 0); got != 5 {
		t.Fatalf("committed %d after an abort, want 5", got)
	}

	wantKerr(t, "AddOffsets", e.txns.AddOffsets(id, pid, epoch, g), nil)
	if code := e.txnOffsetCommit(id, pid, epoch, g, "in", 0, 12); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	e.restart()
	if d := e.txns.Describe(id); d.State != "Ongoing" || len(d.Topics) != 1 || d.Topics[0].Topic != group.TopicName {
		t.Fatalf("after restart: %+v", d)
	}
	if got := e.committed(g, "in", 0); got != 5 {
		t.Fatalf("committed %d after restart, want 5 (12 pending)", got)
	}
	wantKerr(t, "EndTxn commit after restart", e.txns.EndTxn(id, pid, epoch, true), nil)
	if got := e.committed(g, "in", 0); got != 12 {
		t.Fatalf("committed %d after the commit, want 12", got)
	}
	e.restart()
	if got := e.committed(g, "in", 0); got != 12 {
		t.Fatalf("committed %d after a second restart, want 12", got)
	}
	if o := e.log(group.TopicName, e.groups.PartitionFor(g)).OpenTransactions(); len(o) != 0 {
		t.Fatalf("open transactions left in %s: %+v", group.TopicName, o)
	}
}

// markerEpoch is the coordinator epoch of the last marker of producer pid in
// topic-partition, as the partition's producer state keeps it.
func markerEpoch(e *env, topic string, p int32, pid int64) (int32, bool) {
	for _, pe := range e.log(topic, p).ProducerEntries() {
		if pe.ProducerID == pid {
			return pe.CoordinatorEpoch, true
		}
	}
	return 0, false
}
