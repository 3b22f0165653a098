package mirror

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/record"
)

func txnClient(t *testing.T, addrs []string, id, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func txnProduce(t *testing.T, cl *kgo.Client, n int, commit *bool) {
	t.Helper()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("txn-%d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if commit == nil {
		return // left open
	}
	end := kgo.TryAbort
	if *commit {
		end = kgo.TryCommit
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		t.Fatal(err)
	}
}

// sourceReadCommitted fetches partition 0 of topic read_committed from offset 0 and
// returns the aborted transactions the source lists, as "pid@firstOffset".
func sourceAborted(t *testing.T, cl *kgo.Client, topic string) []string {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.IsolationLevel = 1
	req.MaxWaitMillis = 10
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 10 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	kresp, err := cl.Request(context.Background(), &fetchByName{req})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range kresp.(*kmsg.FetchResponse).Topics[0].Partitions[0].AbortedTransactions {
		out = append(out, fmt.Sprintf("%d@%d", a.ProducerID, a.FirstOffset))
	}
	sort.Strings(out)
	return out
}

func sourceLSO(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("LSO: %v", err)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// TestTransactionsAndFailover mirrors committed, aborted and open transactions, checks
// the LSO and aborted-transaction index against the source, then fails over: the topic
// becomes writable, the open transaction is aborted and MIRROR_PID_RESET ends the log.
func TestTransactionsAndFailover(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(1, "payments"))
	addrs := c.ListenAddrs()
	produce(t, addrs, "payments", 50)
	yes, no := true, false
	tx1 := txnClient(t, addrs, "tx-1", "payments")
	txnProduce(t, tx1, 20, &yes)
	txnProduce(t, tx1, 15, &no)
	txnProduce(t, tx1, 10, &yes)
	tx2 := txnClient(t, addrs, "tx-2", "payments")
	txnProduce(t, tx2, 7, &no)
	txnProduce(t, tx2, 5, nil) // still open at failover

	e := newEnv(t)
	e.createMirror("m1", addrs[0])
	e.startTopics("m1", "payments")
	e.waitCaughtUp(src, "m1", "payments")
	sameBatches(t, "payments-0", sourceBatches(t, src, "payments", 0), localBatches(t, e.localLog("payments", 0)))

	l := e.localLog("payments", 0)
	fuo, open := l.FirstUnstableOffset()
	if lso := sourceLSO(t, src, "payments"); !open || fuo != lso {
		t.Fatalf("destination LSO %d (open %v), source LSO %d", fuo, open, lso)
	}
	var dstAborted []string
	for _, a := range l.AbortedTransactions(0, l.LogEndOffset()) {
		dstAborted = append(dstAborted, fmt.Sprintf("%d@%d", a.ProducerID, a.FirstOffset))
	}
	sort.Strings(dstAborted)
	if want := sourceAborted(t, src, "payments"); strings.Join(want, ",") != strings.Join(dstAborted, ",") {
		t.Fatalf("aborted transactions: source %v, destination %v", want, dstAborted)
	}
	if ok, msg := e.m.CheckWrite("payments", 0, OpProduce); ok || !strings.HasPrefix(msg, "READ_ONLY_TOPIC: payments is a mirror topic of m1 (MIRRORING)") {
		t.Fatalf("CheckWrite while mirroring: %v %q", ok, msg)
	}
	if ok, msg := e.m.CheckWrite("payments", -1, OpDeleteTopics); ok || !strings.HasPrefix(msg, "INVALID_CLUSTER_MIRROR_STATES: ") {
		t.Fatalf("CheckWrite delete while mirroring: %v %q", ok, msg)
	}
	openTxns := l.OpenTransactions()
	if len(openTxns) != 1 {
		t.Fatalf("open transactions before failover: %+v", openTxns)
	}
	firstMirrored := localBatches(t, l)[0]
	leoBefore, epochBefore := l.LogEndOffset(), l.LatestEpoch()

	e.stopTopics("m1", "payments")

	if ok, msg := e.m.CheckWrite("payments", 0, OpProduce); !ok {
		t.Fatalf("a STOPPED topic must be writable: %q", msg)
	}
	if got := l.OpenTransactions(); len(got) != 0 {
		t.Fatalf("open transactions after failover: %+v", got)
	}
	if _, open := l.FirstUnstableOffset(); open {
		t.Fatal("LSO still held back after failover")
	}
	tail := localBatches(t, l)
	n := len(tail)
	abort, reset := record.Batch(tail[n-2].data), record.Batch(tail[n-1].data)
	if typ, err := abort.ControlType(); err != nil || typ != record.ControlAbort || abort.ProducerID() != openTxns[0].ProducerID {
		t.Fatalf("expected an ABORT marker for producer %d, got control type %d (%v) pid %d", openTxns[0].ProducerID, typ, err, abort.ProducerID())
	}
	if typ, err := reset.ControlType(); err != nil || typ != record.ControlMirrorPIDReset {
		t.Fatalf("expected MIRROR_PID_RESET last, got %d (%v)", typ, err)
	}
	if abort.BaseOffset() != leoBefore || reset.BaseOffset() != leoBefore+1 {
		t.Fatalf("failover markers at %d and %d, LEO before %d", abort.BaseOffset(), reset.BaseOffset(), leoBefore)
	}
	if l.LeaderEpoch() <= epochBefore || abort.LeaderEpoch() != l.LeaderEpoch() {
		t.Fatalf("epoch not raised: before %d, after %d, marker %d", epochBefore, l.LeaderEpoch(), abort.LeaderEpoch())
	}
	d := e.describe("m1", "payments")[0]
	if d.State != mirrorproto.StateStopped || d.LastMirrorOffset != leoBefore || d.LastMirrorEpoch != epochBefore {
		t.Fatalf("describe after stop: %+v (LEO before %d, epoch %d)", d, leoBefore, epochBefore)
	}
	// spec section 16: a new producer reusing a mirrored producer ID and sequence is not a
	// duplicate of mirrored history
	fb := record.Batch(firstMirrored.data)
	if fb.ProducerID() >= 0 {
		b := record.Build(record.BatchHeader{Timestamp: 1, ProducerID: fb.ProducerID(), ProducerEpoch: fb.ProducerEpoch(), BaseSequence: fb.BaseSequence()},
			[]record.KV{{Value: []byte("after failover")}})
		info, err := l.AppendAsLeader(b, l.LeaderEpoch(), 1)
		if err != nil || info.Duplicate || info.FirstOffset != leoBefore+2 {
			t.Fatalf("produce after failover: %+v %v", info, err)
		}
	}
	// the mirror cannot be deleted while... it can now: every topic is STOPPED
	del := e.m.DeleteClusterMirror(context.Background(), &mirrorproto.DeleteClusterMirrorRequest{MirrorName: "m1", StateValidationOffset: -1})
	if del.ErrorCode != 0 {
		t.Fatalf("delete: %v", mirrorproto.ErrorFor(del.ErrorCode, del.ErrorMessage))
	}
}

// TestCompactedGaps mirrors a compacted topic: offsets keep their gaps.
func TestCompactedGaps(t *testing.T) {
	c, src := newKfake(t)
	addrs := c.ListenAddrs()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "compacted", 1, 1
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "cleanup.policy", kmsg.StringPtr("compact")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(context.Background(), src); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create compacted topic: %v %v", err, resp)
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("compacted"))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	for i := 0; i < 60; i++ { // one batch per record: unique keys between overwritten ones
		key := fmt.Sprintf("key-%d", i%3)
		if i%10 == 0 {
			key = fmt.Sprintf("once-%d", i)
		}
		r := &kgo.Record{Key: []byte(key), Value: []byte(fmt.Sprintf("v%d", i))}
		if err := pcl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c.Compact()
	want := sourceBatches(t, src, "compacted", 0)
	gaps := 0
	for i := 1; i < len(want); i++ {
		if want[i].offset != record.Batch(want[i-1].data).NextOffset() {
			gaps++
		}
	}
	if gaps == 0 {
		t.Skip("kfake did not compact anything")
	}
	e := newEnv(t)
	e.createMirror("m1", addrs[0])
	e.startTopics("m1", "compacted")
	e.waitCaughtUp(src, "m1", "compacted")
	sameBatches(t, "compacted-0", want, localBatches(t, e.localLog("compacted", 0)))
}

// TestPauseResumeRestart pauses (the LEO stays), resumes (continues from the LEO), then
// restarts the destination: states come back from __mirror_state and mirroring resumes
// with no gap and no duplicate.
func TestPauseResumeRestart(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(2, "events"))
	addrs := c.ListenAddrs()
	produce(t, addrs, "events", 200)
	e := newEnv(t)
	e.createMirror("m1", addrs[0])
	e.startTopics("m1", "events")
	e.waitCaughtUp(src, "m1", "events")

	e.pauseTopics("m1", "events")
	paused := map[int32]int64{}
	for _, d := range e.describe("m1", "events") {
		if d.State != mirrorproto.StatePaused {
			t.Fatalf("after pause: %+v", d)
		}
		paused[d.PartitionIndex] = d.DestinationOffset
	}
	preq := mirrorproto.NewPauseMirrorTopicsRequest()
	preq.MirrorName = "m1"
	preq.Topics = []mirrorproto.TopicName{{TopicName: "events"}}
	if resp := e.m.PauseMirrorTopics(context.Background(), preq); resp.Topics[0].ErrorCode != mirrorproto.MirrorTopicAlreadyPaused {
		t.Fatalf("second pause: %+v", resp.Topics)
	}
	produce(t, addrs, "events", 100)
	// the source moved on; a paused partition does not
	for _, d := range e.describe("m1", "events") {
		if d.DestinationOffset != paused[d.PartitionIndex] {
			t.Fatalf("paused partition %d moved from %d to %d", d.PartitionIndex, paused[d.PartitionIndex], d.DestinationOffset)
		}
	}
	if ok, _ := e.m.CheckWrite("events", 0, OpProduce); ok {
		t.Fatal("a PAUSED topic must stay read-only")
	}
	e.resumeTopics("m1", "events")
	e.waitCaughtUp(src, "m1", "events")
	for p := int32(0); p < 2; p++ {
		sameBatches(t, fmt.Sprintf("events-%d after resume", p), sourceBatches(t, src, "events", p), localBatches(t, e.localLog("events", p)))
	}

	// pause again, restart: the paused state survives the restart
	e.pauseTopics("m1", "events")
	e.restart()
	e.waitState("m1", "events", mirrorproto.StatePaused)
	e.resumeTopics("m1", "events")
	produce(t, addrs, "events", 100)
	e.waitCaughtUp(src, "m1", "events")

	// restart while MIRRORING: through LOG_ALIGNMENT (one-way source: the log is trusted,
	// nothing is truncated) and on from the LEO
	e.restart()
	produce(t, addrs, "events", 150)
	e.waitCaughtUp(src, "m1", "events")
	for p := int32(0); p < 2; p++ {
		sameBatches(t, fmt.Sprintf("events-%d after restart", p), sourceBatches(t, src, "events", p), localBatches(t, e.localLog("events", p)))
	}
	for _, d := range e.describe("m1", "events") {
		if d.TruncatedOffset != -1 || d.SkippedOffsets != 0 {
			t.Fatalf("restart truncated or skipped: %+v", d)
		}
	}
}

// TestSourceTopicDeleted: a deleted source topic makes the partitions FAILED and
// non-retryable; stop still works.
func TestSourceTopicDeleted(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(1, "gone", "stays"))
	addrs := c.ListenAddrs()
	produce(t, addrs, "gone", 20)
	produce(t, addrs, "stays", 20)
	e := newEnv(t)
	e.createMirror("m1", addrs[0])
	e.startTopics("m1", "gone", "stays")
	e.waitCaughtUp(src, "m1", "gone")
	req := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("gone")
	req.Topics = append(req.Topics, dt)
	req.TopicNames = []string{"gone"}
	if _, err := req.RequestWith(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	e.waitState("m1", "gone", mirrorproto.StateFailed)
	d := e.describe("m1", "gone")[0]
	if d.RetryAttempt != mirrorproto.RetryAttemptNonRetryable || d.ErrorMessage == nil || *d.ErrorMessage != "The source topic is deleted." {
		t.Fatalf("deleted source topic: %+v", d)
	}
	// the other topic is unaffected
	produce(t, addrs, "stays", 20)
	e.waitCaughtUp(src, "m1", "stays")
	e.stopTopics("m1", "gone")
	if ok, msg := e.m.CheckWrite("gone", 0, OpProduce); !ok {
		t.Fatalf("stopped after failure must be writable: %s", msg)
	}
}

// TestFetchErrorIsolation: a fetch error on one partition, and a corrupt batch on
// another, fail only those partitions, which retry and recover.
func TestFetchErrorIsolation(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(3, "iso"))
	addrs := c.ListenAddrs()
	produce(t, addrs, "iso", 60)
	e := newEnv(t)
	e.createMirror("m1", addrs[0])
	e.startTopics("m1", "iso")
	e.waitCaughtUp(src, "m1", "iso")

	epochs := map[int32]int32{}
	for p := int32(0); p < 3; p++ {
		epochs[p] = e.stateEpoch("iso", p)
	}
	// partition 1: the source answers CORRUPT_MESSAGE until the partition failed (a fault
	// answered only once can land in a prefetch that is then dropped, never applied)
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "iso", Partitions: []int32{1}, Err: kerr.CorruptMessage, Count: -1})
	// partition 2: a batch with a bad CRC, until the partition failed (a response that
	// lands in a dropped prefetch is never applied)
	corrupted := make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if e.stateEpoch("iso", 2) > epochs[2] {
			return nil, nil, false
		}
		c.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		hit := false
		for _, rt := range req.Topics {
			ot := kmsg.NewFetchResponseTopic()
			ot.Topic, ot.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				op := kmsg.NewFetchResponseTopicPartition()
				op.Partition = rp.Partition
				op.HighWatermark = rp.FetchOffset + 1
				op.LastStableOffset = op.HighWatermark
				if rp.Partition == 2 {
					b := record.Build(record.BatchHeader{BaseOffset: rp.FetchOffset, Timestamp: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
						[]record.KV{{Value: []byte("garbage")}})
					b[len(b)-1] ^= 0xff
					op.RecordBatches = b
					hit = true
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		if !hit {
			return nil, nil, false
		}
		once.Do(func() { close(corrupted) })
		return resp, nil, true
	})
	produce(t, addrs, "iso", 90)
	<-corrupted
	eventually(t, func() string { return "partition 1 never failed on CORRUPT_MESSAGE" }, func() bool { return e.stateEpoch("iso", 1) > epochs[1] })
	h.Remove()
	// eventually all recover and catch up, with identical bytes
	e.waitCaughtUp(src, "m1", "iso")
	if got := e.stateEpoch("iso", 0); got != epochs[0] {
		t.Fatalf("partition 0 changed state (epoch %d → %d)", epochs[0], got)
	}
	for _, p := range []int32{1, 2} {
		// FAILED, LOG_ALIGNMENT, MIRRORING at least
		if got := e.stateEpoch("iso", p); got < epochs[p]+3 {
			t.Fatalf("partition %d did not fail and recover (state epoch %d → %d)", p, epochs[p], got)
		}
	}
	for p := int32(0); p < 3; p++ {
		sameBatches(t, fmt.Sprintf("iso-%d", p), sourceBatches(t, src, "iso", p), localBatches(t, e.localLog("iso", p)))
	}
}

func (e *env) stateEpoch(topic string, idx int32) int32 {
	p := e.m.partitionOf(topic, idx)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st.StateEpoch
}
