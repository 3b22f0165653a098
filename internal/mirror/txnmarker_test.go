package mirror

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/record"
)

// abortCheckInterval is the broker config that sets how often the transaction
// coordinator aborts timed-out transactions.
const abortCheckInterval = "transaction.abort.timed.out.transaction.cleanup.interval.ms"

// TestFailbackTimedOutTransaction: a transactional producer on A dies inside a
// transaction; B mirrors the topic and fails over (aborting the transaction in its copy);
// A fails back from B. A's own transaction coordinator then times the transaction out,
// but its marker must not go into A's read-only mirror partition: A's log stays a copy
// of B's, with no truncation beyond the failback's own, and the coordinator still ends
// the transaction (CompleteAbort) so the transactional ID stays usable. The test holds
// the mirror partition's lock while the abort runs, so that a wrong marker cannot be
// repaired by the mirror before the log is compared.
func TestFailbackTimedOutTransaction(t *testing.T) {
	const topic, txnID = "orders", "failback-tx"
	a, b := startBroker(t), startBroker(t)
	// No abort check on A while it is the primary: the transaction must still be open
	// on A's coordinator when A fails back, whatever the speed of the machine.
	a.stop()
	a.props[abortCheckInterval] = "3600000"
	a.start()
	ctx := context.Background()
	acl := a.client()
	createTopicOn(t, acl, topic, 1)
	produceEach(t, a.client(kgo.DefaultProduceTopic(topic)), 3, "a") // offsets 0..2

	// the producer opens a transaction, writes offset 3 and dies (Close ends nothing)
	tx, err := kgo.NewClient(kgo.SeedBrokers(a.b.Addr()), kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(time.Second), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("in-txn")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tx.Close()
	pid := record.Batch(a.log(topic, 0)[3].data).ProducerID()

	eb := b.env()
	eb.createMirror("from-a", a.b.Addr())
	eb.startTopics("from-a", topic)
	eb.waitCaughtUp(acl, "from-a", topic)

	// B stops receiving; A takes 2 records that B never gets and goes down
	eb.pauseTopics("from-a", topic)
	produceEach(t, a.client(kgo.DefaultProduceTopic(topic)), 2, "a-divergent") // 4..5
	a.stop()

	// failover on B: ABORT for the open transaction at 4, MIRROR_PID_RESET at 5
	eb.stopTopics("from-a", topic)
	bBatches := b.log(topic, 0)
	if n := len(bBatches); n != 6 {
		t.Fatalf("B after failover: %d batches, want 6", n)
	}
	if abort := record.Batch(bBatches[4].data); !isControl(abort, record.ControlAbort) || abort.ProducerID() != pid {
		t.Fatalf("B's failover did not abort producer %d at offset 4", pid)
	}

	// A comes back with a short abort check. The transaction timed out long ago, so the
	// first check aborts it; the failback below is done well before (checked).
	a.props[abortCheckInterval] = "3000"
	a.start()
	acl = a.client()
	bcl := b.client()
	ea := a.env()
	ea.createMirror("from-b", b.b.Addr())
	ea.startTopics("from-b", topic)
	ea.waitCaughtUp(bcl, "from-b", topic)

	// Hold the mirror partition's lock while the coordinator ends the transaction: the
	// fetcher cannot apply a response, so a marker written into A's log stays there to
	// be seen instead of being truncated away on the next fetch.
	p := a.m.partitionOf(topic, 0)
	var last kmsg.DescribeTransactionsResponseTransactionState
	func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if st := describeTxn(t, acl, txnID); st.State != "Ongoing" {
			t.Fatalf("premise: A's coordinator ended the transaction (%s) before A caught up with B", st.State)
		}
		eventually(t, func() string { return fmt.Sprintf("A's transaction never ended: %+v", last) }, func() bool {
			last = describeTxn(t, acl, txnID)
			return last.State == "CompleteAbort"
		})
		sameBatches(t, "A once its coordinator ended the transaction", bBatches, a.log(topic, 0))
	}()
	if len(last.Topics) != 0 {
		t.Fatalf("the ended transaction still holds partitions: %+v", last.Topics)
	}
	ea.waitCaughtUp(bcl, "from-b", topic)
	sameBatches(t, "A after failback", bBatches, a.log(topic, 0))
	if d := ea.describe("from-b", topic)[0]; d.State != mirrorproto.StateMirroring || d.TruncatedOffset != 4 || d.TruncatedRecords != 2 {
		t.Fatalf("describe: %+v, want MIRRORING and only the failback's truncation (to 4, 2 records dropped)", d)
	}

	// after A's own failover the transactional ID works again
	ea.stopTopics("from-b", topic)
	tx2 := a.client(kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic))
	if err := tx2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx2.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx2.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit with the same transactional ID after failback: %v", err)
	}
}

// produceEach produces n records one batch each.
func produceEach(t *testing.T, cl *kgo.Client, n int, tag string) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", tag, i))}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", tag, err)
		}
	}
}

func isControl(b record.Batch, typ int16) bool {
	got, err := b.ControlType()
	return b.IsControl() && err == nil && got == typ
}

// describeTxn is DescribeTransactions for one transactional ID.
func describeTxn(t *testing.T, cl *kgo.Client, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.TransactionStates) != 1 {
		t.Fatalf("DescribeTransactions: %v %+v", err, resp)
	}
	st := resp.TransactionStates[0]
	if err := kerr.ErrorForCode(st.ErrorCode); err != nil {
		t.Fatalf("DescribeTransactions %s: %v", id, err)
	}
	return st
}
