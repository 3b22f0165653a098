package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// txnProps keeps __transaction_state small in tests.
var txnProps = map[string]string{"transaction.state.log.num.partitions": "4"}

func startTxnBroker(t *testing.T, extra map[string]string) *brokertest.Broker {
	props := map[string]string{}
	for k, v := range txnProps {
		props[k] = v
	}
	for k, v := range extra {
		props[k] = v
	}
	return brokertest.Start(t, props)
}

// txnProducer is a franz-go transactional producer to topic.
func txnProducer(b *brokertest.Broker, id, topic string, opts ...kgo.Opt) *kgo.Client {
	return b.Client(append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// produceTxn runs one transaction producing values and ends it with commit.
func produceTxn(t *testing.T, p *kgo.Client, commit bool, values ...string) {
	t.Helper()
	ctx := context.Background()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit=%v): %v", commit, err)
	}
}

// readAll appends a non-transactional sentinel record to partition 0 of topic, then
// consumes from the start with the isolation level until the sentinel, returning the
// values before it. Once the sentinel is readable, every earlier transaction is
// resolved for read_committed.
func readAll(t *testing.T, b *brokertest.Broker, topic string, committed bool) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sentinel := "end-" + time.Now().Format("150405.000000000")
	if err := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(sentinel)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	c := b.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchIsolationLevel(iso))
	defer c.Close()
	var out []string
	for {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v without the sentinel before the deadline", out)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		for _, r := range fs.Records() {
			v := string(r.Value)
			if v == sentinel {
				return out
			}
			if !strings.HasPrefix(v, "end-") {
				out = append(out, v)
			}
		}
	}
}

func describeTxn(t *testing.T, cl *kgo.Client, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.TransactionStates[0]
}

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// TestTxnCommitAbortIsolation: read_committed sees only committed transactions'
// records, read_uncommitted sees all; DescribeTransactions and ListTransactions report
// the coordinator state.
func TestTxnCommitAbortIsolation(t *testing.T) {
	b := startTxnBroker(t, nil)
	createTopic(t, b.Client(), "tx", 1, nil)
	p := txnProducer(b, "tx-1", "tx")
	produceTxn(t, p, true, "c1", "c2", "c3")
	produceTxn(t, p, false, "a1", "a2")
	produceTxn(t, p, true, "c4")
	if got := readAll(t, b, "tx", true); !equal(got, []string{"c1", "c2", "c3", "c4"}) {
		t.Fatalf("read_committed got %v", got)
	}
	if got := readAll(t, b, "tx", false); !equal(got, []string{"c1", "c2", "c3", "a1", "a2", "c4"}) {
		t.Fatalf("read_uncommitted got %v", got)
	}
	d := describeTxn(t, b.Client(), "tx-1")
	if d.ErrorCode != 0 || d.State != "CompleteCommit" || d.ProducerEpoch != 0 || len(d.Topics) != 0 {
		t.Fatalf("describe: %+v", d)
	}
	lreq := kmsg.NewPtrListTransactionsRequest()
	lreq.StateFilters = []string{"CompleteCommit", "Bogus"}
	lresp, err := lreq.RequestWith(context.Background(), b.Client())
	if err != nil {
		t.Fatal(err)
	}
	if len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != "tx-1" || !equal(lresp.UnknownStateFilters, []string{"Bogus"}) {
		t.Fatalf("list: %+v", lresp)
	}
	if d := describeTxn(t, b.Client(), "nope"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe unknown: %+v", d)
	}
}

// TestTxnLSOHoldsBackReadCommitted: an open transaction holds the LSO at its first
// offset, so read_committed consumers do not see later records until it ends.
func TestTxnLSOHoldsBackReadCommitted(t *testing.T) {
	b := startTxnBroker(t, nil)
	createTopic(t, b.Client(), "lso", 1, nil)
	ctx := context.Background()
	p := txnProducer(b, "lso-1", "lso")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	plain := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "lso", Value: []byte("plain")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(b.Client())
	lso, err := adm.ListCommittedOffsets(ctx, "lso")
	if err != nil {
		t.Fatal(err)
	}
	hw, err := adm.ListEndOffsets(ctx, "lso")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lso.Lookup("lso", 0); o.Offset != 0 {
		t.Fatalf("LSO %d with a transaction open at 0", o.Offset)
	}
	if o, _ := hw.Lookup("lso", 0); o.Offset != 2 {
		t.Fatalf("high watermark %d, want 2", o.Offset)
	}
	if d := describeTxn(t, b.Client(), "lso-1"); d.State != "Ongoing" || len(d.Topics) != 1 || d.Topics[0].Topic != "lso" {
		t.Fatalf("describe: %+v", d)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	lso, err = adm.ListCommittedOffsets(ctx, "lso")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lso.Lookup("lso", 0); o.Offset != 3 {
		t.Fatalf("LSO %d after commit, want 3 (two records and the marker)", o.Offset)
	}
	if got := readAll(t, b, "lso", true); !equal(got, []string{"open", "plain"}) {
		t.Fatalf("read_committed got %v", got)
	}
}

// TestTxnFencing: a second producer with the same transactional ID fences the first:
// the first's open transaction is aborted and its next produce and commit fail.
func TestTxnFencing(t *testing.T) {
	b := startTxnBroker(t, nil)
	createTopic(t, b.Client(), "fence", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p1 := txnProducer(b, "fence-1", "fence")
	if err := p1.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p1.ProduceSync(ctx, &kgo.Record{Value: []byte("p1-a")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p2 := txnProducer(b, "fence-1", "fence")
	produceTxn(t, p2, true, "p2-a")
	if err := p1.ProduceSync(ctx, &kgo.Record{Value: []byte("p1-b")}).FirstErr(); err == nil {
		t.Fatal("fenced producer's produce succeeded")
	}
	if err := p1.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("fenced producer's commit succeeded")
	}
	if got := readAll(t, b, "fence", true); !equal(got, []string{"p2-a"}) {
		t.Fatalf("read_committed got %v", got)
	}
	if d := describeTxn(t, b.Client(), "fence-1"); d.State != "CompleteCommit" || d.ProducerEpoch != 2 {
		t.Fatalf("describe: %+v (want epoch 2: fence + InitProducerId)", d)
	}
}

// TestTxnTimeoutAborts: a transaction older than its timeout is aborted by the
// coordinator with an epoch bump; its records never become visible to read_committed.
func TestTxnTimeoutAborts(t *testing.T) {
	b := startTxnBroker(t, map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "50"})
	createTopic(t, b.Client(), "tmo", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := txnProducer(b, "tmo-1", "tmo", kgo.TransactionTimeout(200*time.Millisecond))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for {
		d := describeTxn(t, b.Client(), "tmo-1")
		if d.State == "CompleteAbort" {
			if d.ProducerEpoch != 1 {
				t.Fatalf("describe after timeout: %+v", d)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("transaction not aborted: %+v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("commit of a timed-out transaction succeeded")
	}
	if got := readAll(t, b, "tmo", true); len(got) != 0 {
		t.Fatalf("read_committed got %v", got)
	}
}

// TestTxnOffsetCommitVisibleOnCommit: TxnOffsetCommit offsets stay invisible to
// OffsetFetch until EndTxn commits; an aborted transaction's offsets never show.
func TestTxnOffsetCommitVisibleOnCommit(t *testing.T) {
	b := startTxnBroker(t, nil)
	cl := b.Client()
	createTopic(t, cl, "in", 1, nil)
	ctx := context.Background()
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = kmsg.StringPtr("off-1")
	init.TransactionTimeoutMillis = 60000
	ir, err := init.RequestWith(ctx, cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %v", err, ir)
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch
	commitOffset := func(off int64) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "off-1", "g", pid, epoch, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "in"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, off
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	addOffsets := func() {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "off-1", pid, epoch, "g"
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("AddOffsetsToTxn: %v %+v", err, resp)
		}
	}
	endTxn := func(commit bool) {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "off-1", pid, epoch, commit
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("EndTxn: %v %+v", err, resp)
		}
	}
	committed := func() int64 {
		offs, err := kadm.NewClient(cl).FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offs.Lookup("in", 0)
		if !ok {
			return -1
		}
		return o.At
	}
	if code := commitOffset(5); code != kerr.InvalidTxnState.Code {
		t.Fatalf("TxnOffsetCommit without AddOffsetsToTxn: %v", kerr.ErrorForCode(code))
	}
	addOffsets()
	if code := commitOffset(5); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if got := committed(); got != -1 {
		t.Fatalf("offset %d visible before commit", got)
	}
	endTxn(true)
	if got := committed(); got != 5 {
		t.Fatalf("offset %d after commit, want 5", got)
	}
	addOffsets()
	if code := commitOffset(9); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	endTxn(false)
	if got := committed(); got != 5 {
		t.Fatalf("offset %d after an aborted transaction, want 5", got)
	}
	b.Restart()
	if got := committed(); got != 5 {
		t.Fatalf("offset %d after restart, want 5", got)
	}
}

// TestTxnSurvivesRestart: a committed transaction stays committed and an open one
// stays Ongoing across a restart, and the same producer commits it afterwards.
func TestTxnSurvivesRestart(t *testing.T) {
	b := startTxnBroker(t, nil)
	createTopic(t, b.Client(), "rs", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := txnProducer(b, "rs-1", "rs")
	produceTxn(t, p, true, "r1")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("r2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	if d := describeTxn(t, b.Client(), "rs-1"); d.State != "Ongoing" || len(d.Topics) != 1 {
		t.Fatalf("describe after restart: %+v", d)
	}
	lso, err := kadm.NewClient(b.Client()).ListCommittedOffsets(ctx, "rs")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lso.Lookup("rs", 0); o.Offset != 2 {
		t.Fatalf("LSO %d after restart, want 2 (the open transaction's first offset)", o.Offset)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, b, "rs", true); !equal(got, []string{"r1", "r2"}) {
		t.Fatalf("read_committed got %v", got)
	}
	b.Restart()
	if d := describeTxn(t, b.Client(), "rs-1"); d.State != "CompleteCommit" {
		t.Fatalf("describe after second restart: %+v", d)
	}
	if got := readAll(t, b, "rs", true); !equal(got, []string{"r1", "r2"}) {
		t.Fatalf("read_committed after second restart got %v", got)
	}
}

// TestTxnMirrorTopicReadOnly: AddPartitionsToTxn to a partition of a running mirror
// topic is refused with POLICY_VIOLATION; once the mirror topic is stopped a
// transactional producer commits to it (issue 4).
func TestTxnMirrorTopicReadOnly(t *testing.T) {
	src := brokertest.Start(t, nil)
	createTopic(t, src.Client(), "mt", 1, nil)
	if err := src.Client().ProduceSync(context.Background(), &kgo.Record{Topic: "mt", Value: []byte("from-source")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dst := startTxnBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dst.MirrorFrom(ctx, "m1", src.Addr(), "mt")
	adm := dst.Client(kgo.MaxVersions(mirrorproto.ClientVersions()))
	// The mirror topic exists on the destination once its first record is mirrored.
	if got := readAll(t, src, "mt", false); !equal(got, []string{"from-source"}) {
		t.Fatalf("source: %v", got)
	}
	c := dst.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"mt": {0: kgo.NewOffset().AtStart()}}))
	for mirrored := false; !mirrored; {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("nothing mirrored before the deadline")
		}
		mirrored = len(fs.Records()) > 0
	}
	cl := dst.Client()
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = kmsg.StringPtr("mt-1")
	init.TransactionTimeoutMillis = 60000
	ir, err := init.RequestWith(ctx, cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %v", err, ir)
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "mt-1", ir.ProducerID, ir.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "mt", Partitions: []int32{0}}}
	ar, err := add.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := ar.Topics[0].Partitions[0].ErrorCode; code != kerr.PolicyViolation.Code {
		t.Fatalf("AddPartitionsToTxn to a mirror topic: %v", kerr.ErrorForCode(code))
	}
	stop := mirrorproto.NewStopMirrorTopicsRequest()
	stop.MirrorName = "m1"
	stop.Topics = []mirrorproto.TopicName{{TopicName: "mt"}}
	if _, err := adm.Request(ctx, stop); err != nil {
		t.Fatal(err)
	}
	p := txnProducer(dst, "mt-2", "mt")
	produceTxn(t, p, true, "after-stop")
	if got := readAll(t, dst, "mt", true); !equal(got, []string{"from-source", "after-stop"}) {
		t.Fatalf("read_committed on the stopped mirror topic: %v", got)
	}
}

// TestTxnGroupTransactSession: franz-go's consume-transform-produce session commits
// the group's offsets (AddOffsetsToTxn + TxnOffsetCommit v3 with member and
// generation) and the produced records in one transaction.
func TestTxnGroupTransactSession(t *testing.T) {
	b := startTxnBroker(t, nil)
	createTopic(t, b.Client(), "gin", 1, nil)
	createTopic(t, b.Client(), "gout", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := b.Client(kgo.DefaultProduceTopic("gin"))
	for _, v := range []string{"1", "2", "3"} {
		if err := in.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("gts-1"),
		kgo.ConsumerGroup("gts"), kgo.ConsumeTopics("gin"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic("gout"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.Begin(); err != nil {
		t.Fatal(err)
	}
	var n int
	for n < 3 {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 3 before the deadline", n)
		}
		for _, r := range fs.Records() {
			n++
			if err := sess.ProduceSync(ctx, &kgo.Record{Value: append([]byte("out-"), r.Value...)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	committed, err := sess.End(ctx, kgo.TryCommit)
	if err != nil || !committed {
		t.Fatalf("End: committed=%v err=%v", committed, err)
	}
	offs, err := kadm.NewClient(b.Client()).FetchOffsets(ctx, "gts")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("gin", 0); !ok || o.At != 3 {
		t.Fatalf("group offset %+v, want 3", o)
	}
	if got := readAll(t, b, "gout", true); !equal(got, []string{"out-1", "out-2", "out-3"}) {
		t.Fatalf("read_committed got %v", got)
	}
}

// TestTxnListOffsetsStopsAtLSO: as Kafka's Partition.fetchOffsetForTimestamp, a
// read_committed ListOffsets by timestamp or MAX_TIMESTAMP finds nothing at or past the
// LSO, while read_uncommitted finds the open transaction's record.
func TestTxnListOffsetsStopsAtLSO(t *testing.T) {
	b := startTxnBroker(t, nil)
	createTopic(t, b.Client(), "lsots", 1, nil)
	ctx := context.Background()
	p := txnProducer(b, "lsots-1", "lsots")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ts := time.Now().Add(time.Hour)
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("open"), Timestamp: ts}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	defer p.EndTransaction(ctx, kgo.TryAbort)
	list := func(isolation int8, timestamp int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.IsolationLevel = isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lsots"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = timestamp
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, b.Client())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("response %+v", resp)
		}
		sp := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
			t.Fatalf("ListOffsets(isolation %d, timestamp %d): %v", isolation, timestamp, err)
		}
		return sp
	}
	for _, c := range []struct {
		isolation int8
		timestamp int64
		offset    int64
	}{
		{0, 0, 0}, {0, -3, 0}, {0, -1, 1},
		{1, 0, -1}, {1, -3, -1}, {1, -1, 0},
	} {
		if got := list(c.isolation, c.timestamp); got.Offset != c.offset {
			t.Fatalf("ListOffsets(isolation %d, timestamp %d) = offset %d, want %d", c.isolation, c.timestamp, got.Offset, c.offset)
		}
	}
}

// TestTxnOffsetCommitSurvivesRestart: an exactly-once step (franz-go transactional
// producer, AddOffsetsToTxn + TxnOffsetCommit) is interrupted by a broker restart
// between TxnOffsetCommit and EndTxn: after the restart the group's offset is still
// pending (OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT, without it the
// old offset), and the producer's commit then makes both the records and the offset
// visible.
func TestTxnOffsetCommitSurvivesRestart(t *testing.T) {
	b := startTxnBroker(t, nil)
	createTopic(t, b.Client(), "eos-in", 1, nil)
	createTopic(t, b.Client(), "eos-out", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(b.Client())
	if r, err := adm.CommitOffsets(ctx, "eos-g", kadm.Offsets{"eos-in": {0: {Topic: "eos-in", Partition: 0, At: 1}}}); err != nil || r.Error() != nil {
		t.Fatal(err, r.Error())
	}
	p := txnProducer(b, "eos-1", "eos-out")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("o1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := p.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "eos-1", pid, epoch, "eos-g"
	if r, err := add.RequestWith(ctx, p); err != nil || r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %+v", err, r)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch, commit.Generation = "eos-1", "eos-g", pid, epoch, -1
	commit.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "eos-in", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}}}
	if r, err := commit.RequestWith(ctx, p); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v %+v", err, r)
	}

	b.Restart()
	stable := func() kmsg.OffsetFetchResponseGroupTopicPartition {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = true
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "eos-g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "eos-in", Partitions: []int32{0}}}}}
		resp, err := req.RequestWith(ctx, b.Client())
		if err != nil || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("OffsetFetch: %v %+v", err, resp)
		}
		return resp.Groups[0].Topics[0].Partitions[0]
	}
	if got := stable(); got.ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("RequireStable after restart: %v (offset %d), want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(got.ErrorCode), got.Offset)
	}
	committed := func() int64 {
		offs, err := kadm.NewClient(b.Client()).FetchOffsets(ctx, "eos-g")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := offs.Lookup("eos-in", 0)
		return o.At
	}
	if got := committed(); got != 1 {
		t.Fatalf("committed offset %d after restart, want the old 1", got)
	}
	if d := describeTxn(t, b.Client(), "eos-1"); d.State != "Ongoing" || len(d.Topics) != 2 {
		t.Fatalf("transaction after restart: %+v", d)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != 3 {
		t.Fatalf("committed offset %d after the commit, want 3", got)
	}
	if got := stable(); got.ErrorCode != 0 || got.Offset != 3 {
		t.Fatalf("RequireStable after the commit: %v %d", kerr.ErrorForCode(got.ErrorCode), got.Offset)
	}
	if got := readAll(t, b, "eos-out", true); !equal(got, []string{"o1"}) {
		t.Fatalf("read_committed got %v", got)
	}
	b.Restart()
	if got := committed(); got != 3 {
		t.Fatalf("committed offset %d after a second restart, want 3", got)
	}
}
