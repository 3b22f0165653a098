package mirror

// Edge cases of spec section 16 ("Edge cases that must hold") that are not covered by
// acceptance_test.go, scenarios_test.go, admin_test.go and internal/storage. The table in
// docs/mirroring-internals.md names the test for each case.

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/record"
)

// createTopicWith creates a one-partition topic with configs (name, value pairs).
func createTopicWith(t *testing.T, cl *kgo.Client, name string, configs ...string) {
	t.Helper()
	req := kmsgCreateTopic(name, 1)
	for i := 0; i+1 < len(configs); i += 2 {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = configs[i], kmsg.StringPtr(configs[i+1])
		req.Topics[0].Configs = append(req.Topics[0].Configs, cfg)
	}
	if resp, err := req.RequestWith(context.Background(), cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", name, err, resp)
	}
}

// TestEdgeGapWiderThanSegmentIndex (spec section 16, gaps wider than a segment can
// index): the source log holds batches at 0, 1 and then at 2^31+100, more than a 32-bit
// relative index offset past the segment base. The mirror rolls a new segment named for
// the far batch, the bytes match, and reads across the gap work, also after a restart of
// the destination (indexes rebuilt or reloaded).
func TestEdgeGapWiderThanSegmentIndex(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	acl := a.client()
	createTopicOn(t, acl, "gap", 1)
	l, err := a.b.Log("gap", 0)
	if err != nil {
		t.Fatal(err)
	}
	far := int64(1)<<31 + 100
	now := time.Now().UnixMilli()
	var buf []byte
	for i, base := range []int64{0, 1, far, far + 1} {
		buf = append(buf, record.Build(record.BatchHeader{BaseOffset: base, Timestamp: now + int64(i), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]record.KV{{Value: []byte(fmt.Sprintf("gap-%d", i))}})...)
	}
	if _, err := l.AppendAsFollower(buf); err != nil {
		t.Fatal(err)
	}
	l.UpdateHighWatermark(l.LogEndOffset()) // written under the partition layer: its HW moved as a leader of one replica would
	if got := sourceEnds(t, acl, "gap")[0]; got != far+2 {
		t.Fatalf("source end offset %d, want %d", got, far+2)
	}
	eb := b.env()
	eb.createMirror("m1", a.b.Addr())
	eb.startTopics("m1", "gap")
	eb.waitCaughtUp(acl, "m1", "gap")
	want := sourceBatches(t, acl, "gap", 0)
	if len(want) != 4 {
		t.Fatalf("source batches: %d", len(want))
	}
	check := func(what string) {
		t.Helper()
		dst := b.client()
		sameBatches(t, what, want, sourceBatches(t, dst, "gap", 0))
		segs, _ := filepath.Glob(filepath.Join(b.props["log.dirs"], "gap-0", "*.log"))
		sort.Strings(segs)
		if len(segs) != 2 || filepath.Base(segs[1]) != fmt.Sprintf("%020d.log", far) {
			t.Fatalf("%s: destination segments %v, want a roll at %d", what, segs, far)
		}
		for _, off := range []int64{2, far, far + 1} { // inside the gap, then each far batch
			wantBase := far
			if off == far+1 {
				wantBase = far + 1
			}
			if got := fetchFirst(t, dst, "gap", off); got.BaseOffset() != wantBase {
				t.Fatalf("%s: fetch at %d returned batch %d, want %d", what, off, got.BaseOffset(), wantBase)
			}
		}
		if got := listOffsets(t, dst, "gap", now+3)[0]; got != far+1 {
			t.Fatalf("%s: time lookup past the gap = %d, want %d", what, got, far+1)
		}
	}
	check("mirrored")
	b.stop()
	b.start()
	check("after a destination restart")
}

// fetchAborted sends one raw Fetch (v12) for partition 0 of topic at offset with the
// isolation level (0 read_uncommitted, 1 read_committed) and a partition limit of
// maxBytes; it returns the aborted transactions listed ("pid@firstOffset", sorted; nil
// when the response has none), and the base offsets of the batches returned.
func fetchAborted(t *testing.T, cl *kgo.Client, topic string, offset int64, isolation int8, maxBytes int32) ([]string, []int64) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.IsolationLevel = isolation
	req.MaxWaitMillis, req.MaxBytes = 10, maxBytes
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = offset, maxBytes
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	kresp, err := cl.Request(context.Background(), &fetchByName{req})
	if err != nil {
		t.Fatal(err)
	}
	rp := kresp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if rp.ErrorCode != 0 {
		t.Fatalf("fetch %s at %d: %v", topic, offset, kerr.ErrorForCode(rp.ErrorCode))
	}
	var aborted []string
	for _, a := range rp.AbortedTransactions {
		aborted = append(aborted, fmt.Sprintf("%d@%d", a.ProducerID, a.FirstOffset))
	}
	sort.Strings(aborted)
	var bases []int64
	for _, b := range splitBatches(rp.RecordBatches) {
		bases = append(bases, b.offset)
	}
	return aborted, bases
}

// TestEdgeAbortedTransactionsAcrossSegments (spec section 16): with segment.bytes=14 every
// batch is a segment of its own. A transaction opened at offset 0 stays open while plain
// records and a committed transaction are written, and is aborted much later. On the
// mirror, exactly as on the source, a read_committed Fetch positioned in any later
// segment before the abort marker lists that transaction (started in the first segment),
// one positioned after the marker lists none, and read_uncommitted Fetches list none.
func TestEdgeAbortedTransactionsAcrossSegments(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	acl := a.client()
	createTopicWith(t, acl, "atx", "segment.bytes", "14")
	ctx := context.Background()
	tx1 := a.client(kgo.TransactionalID("edge-tx-1"), kgo.DefaultProduceTopic("atx"))
	tx2 := a.client(kgo.TransactionalID("edge-tx-2"), kgo.DefaultProduceTopic("atx"))
	plain := a.client(kgo.DefaultProduceTopic("atx"))
	one := func(cl *kgo.Client, v string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx1.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	one(tx1, "aborted-0") // offset 0
	for i := 0; i < 4; i++ {
		one(plain, fmt.Sprint("plain-", i)) // 1..4
	}
	if err := tx2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	one(tx2, "committed") // 5
	if err := tx2.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	} // marker at 6
	eventually(t, func() string { return "commit marker" }, func() bool { return sourceEnds(t, acl, "atx")[0] == 7 })
	one(tx1, "aborted-1") // 7
	one(plain, "plain-4") // 8
	if err := tx1.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	} // marker at 9
	eventually(t, func() string { return "abort marker" }, func() bool { return sourceEnds(t, acl, "atx")[0] == 10 })
	one(plain, "plain-5") // 10

	eb := b.env()
	eb.createMirror("m1", a.b.Addr())
	eb.startTopics("m1", "atx")
	eb.waitCaughtUp(acl, "m1", "atx")
	bcl := b.client()
	sameBatches(t, "atx-0", sourceBatches(t, acl, "atx", 0), sourceBatches(t, bcl, "atx", 0))
	if segs, _ := filepath.Glob(filepath.Join(b.props["log.dirs"], "atx-0", "*.log")); len(segs) < 10 {
		t.Fatalf("%d segments on the destination: segment.bytes=14 not applied", len(segs))
	}
	pid := record.Batch(sourceBatches(t, acl, "atx", 0)[0].data).ProducerID()
	wantAborted := []string{fmt.Sprintf("%d@0", pid)}
	for _, off := range []int64{0, 2, 5, 6, 7, 8, 9, 10} {
		for _, maxBytes := range []int32{1, 1 << 20} { // one batch, or everything to the end
			for i, cl := range []*kgo.Client{acl, bcl} {
				got, bases := fetchAborted(t, cl, "atx", off, 1, maxBytes)
				if len(bases) == 0 || bases[0] != off {
					t.Fatalf("read_committed fetch at %d returned batches %v", off, bases)
				}
				want := wantAborted
				if off > 9 {
					want = nil
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("side %d: read_committed fetch at %d (max %d bytes): aborted %v, want %v", i, off, maxBytes, got, want)
				}
				if got, _ := fetchAborted(t, cl, "atx", off, 0, maxBytes); len(got) != 0 {
					t.Fatalf("side %d: read_uncommitted fetch at %d lists aborted transactions %v", i, off, got)
				}
			}
		}
	}
	// a read_committed consumer on the mirror skips both aborted records
	got := accConsume(t, b.b.Addr(), "atx", 10, true)
	var vals []string
	for _, r := range got {
		vals = append(vals, r.val)
	}
	if strings.Join(vals, ",") != "plain-0,plain-1,plain-2,plain-3,committed,plain-4,plain-5" {
		t.Fatalf("read_committed on the mirror: %v", vals)
	}
}

// offsetForLeaderEpoch asks cl for the end offset of epoch in partition 0 of topic
// (raw OffsetForLeaderEpoch, current leader epoch unknown, as a consumer validating its
// position sends it).
func offsetForLeaderEpoch(t *testing.T, cl *kgo.Client, topic string, epoch int32) (int32, int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("OffsetForLeaderEpoch %s epoch %d: %v", topic, epoch, kerr.ErrorForCode(p.ErrorCode))
	}
	return p.LeaderEpoch, p.EndOffset
}

// TestEdgeTruncationBeforeExposure (spec section 16): A holds 4 records mirrored to B and
// 3 more that B never gets; B fails over and takes 2. When A fails back from B, the
// divergent tail (offsets 4..6) is truncated in LOG_ALIGNMENT before the fetcher appends
// anything: a consumer whose position (7, epoch of the divergent records) lies inside the
// truncated tail gets the divergence offset 4 from OffsetForLeaderEpoch on both clusters,
// no consumer reads a divergent record from A after the failback, and a franz-go consumer
// resuming at 7 with that epoch detects the truncation and reads B's records. (On a
// single broker the HW is the LEO; the ISR wait of LOG_ALIGNMENT step 4 is immediate.)
func TestEdgeTruncationBeforeExposure(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	ctx := context.Background()
	acl := a.client()
	createTopicOn(t, acl, "tt", 1)
	produceTo := func(kb *kbroker, n int, tag string) {
		t.Helper()
		cl := kb.client(kgo.DefaultProduceTopic("tt"))
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", tag, i))}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", tag, err)
			}
		}
	}
	produceTo(a, 4, "shared")
	eb := b.env()
	eb.createMirror("from-a", a.b.Addr())
	eb.startTopics("from-a", "tt")
	eb.waitCaughtUp(acl, "from-a", "tt")
	eb.pauseTopics("from-a", "tt")
	produceTo(a, 3, "divergent")
	al, err := a.b.Log("tt", 0)
	if err != nil {
		t.Fatal(err)
	}
	divEpoch := al.EpochForOffset(6)
	a.stop()
	eb.stopTopics("from-a", "tt")
	produceTo(b, 2, "b")
	bcl := b.client()
	bEnd := sourceEnds(t, bcl, "tt")[0]

	a.start()
	ea := a.env()
	ea.createMirror("from-b", b.b.Addr())
	ea.startTopics("from-b", "tt")
	acl = a.client()
	ea.waitCaughtUp(bcl, "from-b", "tt")
	sameBatches(t, "A after failback", sourceBatches(t, bcl, "tt", 0), sourceBatches(t, acl, "tt", 0))
	if d := ea.describe("from-b", "tt")[0]; d.TruncatedOffset != 4 || d.TruncatedRecords != 3 {
		t.Fatalf("truncation report: %+v", d)
	}
	// a consumer positioned at 7 (after the divergent records, epoch divEpoch) validates
	// its position: the answer is the divergence offset, on both clusters
	for side, cl := range map[string]*kgo.Client{"A": acl, "B": bcl} {
		e, end := offsetForLeaderEpoch(t, cl, "tt", divEpoch)
		if e != divEpoch || end != 4 {
			t.Fatalf("%s: OffsetForLeaderEpoch(%d) = epoch %d end %d, want epoch %d end 4", side, divEpoch, e, end, divEpoch)
		}
	}
	// nothing divergent is readable on A, by either isolation level
	for _, committed := range []bool{false, true} {
		for _, r := range accConsume(t, a.b.Addr(), "tt", bEnd-1, committed) {
			if strings.HasPrefix(r.val, "divergent") {
				t.Fatalf("read_committed=%v: A exposes the truncated record %+v", committed, r)
			}
		}
	}
	// a franz-go consumer that had read A's divergent tail resumes at 7 with epoch divEpoch:
	// it detects the truncation and reads B's records from the divergence point
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.b.Addr()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tt": {0: kgo.NewOffset().At(7).WithEpoch(divEpoch)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var seen []string
	for len(seen) == 0 || !strings.HasPrefix(seen[len(seen)-1], "b-1") {
		fs := cl.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatalf("franz-go consumer after truncation saw %v", seen)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen = append(seen, fmt.Sprintf("%s@%d", r.Value, r.Offset))
		})
	}
	// it resumes at the divergence point 4 (MIRROR_PID_RESET, not a record)
	if strings.Join(seen, ",") != "b-0@5,b-1@6" {
		t.Fatalf("franz-go consumer after truncation: %v, want b-0@5,b-1@6", seen)
	}
}

// epochAnswers checks the leader-epoch cache of l for consistency (epochs strictly
// increasing, start offsets non-decreasing and at most the LEO, every entry's
// OffsetForLeaderEpoch answer ending where the next entry starts, or at the LEO) and
// returns it rendered, with the LEO.
func epochAnswers(t *testing.T, what string, e *env, topic string) (string, int32) {
	t.Helper()
	l := e.localLog(topic, 0)
	entries, leo := l.EpochEntries(), l.LogEndOffset()
	var sb strings.Builder
	for i, en := range entries {
		if i > 0 && (en.Epoch <= entries[i-1].Epoch || en.StartOffset < entries[i-1].StartOffset) {
			t.Fatalf("%s: epoch cache not monotonic: %v", what, entries)
		}
		if en.StartOffset > leo {
			t.Fatalf("%s: epoch cache entry %v past the LEO %d", what, en, leo)
		}
		wantEnd := leo
		if i+1 < len(entries) {
			wantEnd = entries[i+1].StartOffset
		}
		if ge, end := l.EndOffsetForEpoch(en.Epoch); ge != en.Epoch || end != wantEnd {
			t.Fatalf("%s: EndOffsetForEpoch(%d) = %d %d, want %d %d (cache %v, LEO %d)", what, en.Epoch, ge, end, en.Epoch, wantEnd, entries, leo)
		}
		fmt.Fprintf(&sb, "%d@%d ", en.Epoch, en.StartOffset)
	}
	fmt.Fprintf(&sb, "LEO %d", leo)
	return sb.String(), l.LeaderEpoch()
}

// TestEdgeEpochOnlyHistory (spec section 16): failover of an empty mirror partition, and
// several stop/start cycles with no records in between (each failover raises the epoch
// and writes only MIRROR_PID_RESET), leave a leader-epoch cache whose answers are
// consistent after every step and read back the same after a restart; every failover
// raises the epoch above every earlier one, and a restart never lowers it. Each start after STOPPED from kfake, which
// cannot answer the failback lookup, truncates the log to 0 (spec section 4); that
// truncation must not lower the leader epoch (storage Log.LeaderEpoch).
func TestEdgeEpochOnlyHistory(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(1, "quiet"))
	_ = c
	e := newEnv(t)
	e.createMirror("m1", c.ListenAddrs()[0])
	latest, lastFailover := int32(-1), int32(-1)
	var regressions []string
	for cycle := 0; cycle < 3; cycle++ {
		e.startTopics("m1", "quiet")
		e.waitCaughtUp(src, "m1", "quiet")
		what := fmt.Sprintf("cycle %d mirroring", cycle)
		_, ep := epochAnswers(t, what, e, "quiet")
		if ep < latest {
			regressions = append(regressions, fmt.Sprintf("%s: latest epoch %d → %d", what, latest, ep))
		}
		latest = ep
		e.stopTopics("m1", "quiet")
		what = fmt.Sprintf("cycle %d stopped", cycle)
		before, ep := epochAnswers(t, what, e, "quiet")
		if ep <= lastFailover || ep < 0 {
			regressions = append(regressions, fmt.Sprintf("%s: failover epoch %d, the one before was %d (%s)", what, ep, lastFailover, before))
		}
		latest, lastFailover = ep, ep
		e.restart()
		e.waitState("m1", "quiet", mirrorproto.StateStopped)
		// a restart elects the broker again at a higher leader epoch (as Kafka's
		// controller does: the restarted broker is fenced, then unfenced); the cache of
		// batch epochs reads back the same
		after, ep := epochAnswers(t, what+" after restart", e, "quiet")
		if after != before || ep < latest {
			t.Fatalf("%s: epoch cache %q with leader epoch %d before the restart, %q with %d after", what, before, latest, after, ep)
		}
		latest, lastFailover = ep, ep
	}
	// the topic, stopped, takes a record at the latest epoch: still consistent
	l := e.localLog("quiet", 0)
	b := record.Build(record.BatchHeader{Timestamp: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.KV{{Value: []byte("x")}})
	if _, err := l.AppendAsLeader(b, l.LeaderEpoch(), 1); err != nil {
		t.Fatal(err)
	}
	epochAnswers(t, "after a produce", e, "quiet")
	if len(regressions) > 0 {
		t.Fatalf("spec section 16, epoch-only history: the leader epoch went down: %s", strings.Join(regressions, "; "))
	}
}

// TestEdgeSourceTopicRecreated (spec sections 8 and 16): the source topic is deleted and
// recreated under the same name (new topic ID) and quickly filled with more records than
// before. The mirror partition goes FAILED non-retryable and the mirror topic keeps
// exactly the old records: nothing of the new topic is appended.
func TestEdgeSourceTopicRecreated(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(1, "re"))
	addrs := c.ListenAddrs()
	produce(t, addrs, "re", 10)
	e := newEnv(t)
	e.createMirror("m1", addrs[0])
	e.startTopics("m1", "re")
	e.waitCaughtUp(src, "m1", "re")
	old := localBatches(t, e.localLog("re", 0))
	oldID := sourceTopicID(t, src, "re")

	req := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("re")
	req.Topics = append(req.Topics, dt)
	req.TopicNames = []string{"re"}
	if resp, err := req.RequestWith(context.Background(), src); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %v %+v", err, resp)
	}
	createTopicOn(t, src, "re", 1)
	if sourceTopicID(t, src, "re") == oldID {
		t.Fatal("kfake kept the topic ID")
	}
	produce(t, addrs, "re", 40) // past the mirror's LEO: a name-only fetch would mix them in

	e.waitState("m1", "re", mirrorproto.StateFailed)
	d := e.describe("m1", "re")[0]
	if d.RetryAttempt != mirrorproto.RetryAttemptNonRetryable || d.ErrorMessage == nil {
		t.Fatalf("recreated source topic: %+v", d)
	}
	sameBatches(t, "re-0 after the source was recreated", old, localBatches(t, e.localLog("re", 0)))
	// still nothing mixed in after further sync ticks
	produce(t, addrs, "re", 10)
	time.Sleep(time.Duration(3*fastConfig().RefreshIntervalMs) * time.Millisecond) // three sync ticks
	sameBatches(t, "re-0 later", old, localBatches(t, e.localLog("re", 0)))
	if d := e.describe("m1", "re")[0]; d.State != mirrorproto.StateFailed || d.RetryAttempt != mirrorproto.RetryAttemptNonRetryable {
		t.Fatalf("recreated source topic, later: %+v", d)
	}
}

// TestEdgeLargeRecords (spec section 16): a 3 MiB batch on a source topic with
// max.message.bytes=4 MiB mirrors although the mirror's fetch.max.bytes and
// fetch.response.max.bytes are 1 MiB (a fetch returns at least one whole batch); the
// bytes match, and a consumer of the mirror topic with 1 MiB fetch limits reads it.
func TestEdgeLargeRecords(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	acl := a.client()
	createTopicWith(t, acl, "big", "max.message.bytes", fmt.Sprint(4<<20))
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16)
	pcl := a.client(kgo.DefaultProduceTopic("big"), kgo.ProducerBatchMaxBytes(5<<20), kgo.MaxBufferedBytes(16<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < 2; i++ {
		if err := pcl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(fmt.Sprint("small-", i))}, &kgo.Record{Value: big}).FirstErr(); err != nil {
			t.Fatalf("produce 3 MiB: %v", err)
		}
	}
	eb := b.env()
	eb.createMirror("m1", a.b.Addr(), "fetch.max.bytes", fmt.Sprint(1<<20), "fetch.response.max.bytes", fmt.Sprint(1<<20))
	eb.startTopics("m1", "big")
	eb.waitCaughtUp(acl, "m1", "big")
	bcl := b.client()
	want := sourceBatches(t, acl, "big", 0)
	sameBatches(t, "big-0", want, sourceBatches(t, bcl, "big", 0))
	largest := 0
	for _, bt := range want {
		largest = max(largest, len(bt.data))
	}
	if largest < 3<<20 {
		t.Fatalf("largest batch %d bytes, want at least 3 MiB", largest)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.b.Addr()), kgo.FetchMaxBytes(1<<20), kgo.FetchMaxPartitionBytes(1<<20),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"big": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	for n < 4 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 4 records of the mirror topic", n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset%2 == 1 && !bytes.Equal(r.Value, big) {
				t.Fatalf("record %d: %d bytes", r.Offset, len(r.Value))
			}
			n++
		})
	}
}

// TestEdgeRestartAfterStopFromKmirror (spec sections 4, 6 and 16): a mirror topic stopped
// (epoch raised to 10) and started again from a kmirror source is truncated by
// LOG_ALIGNMENT to the last mirror position it recorded at the failover (offset 5: only
// the MIRROR_PID_RESET goes); its leader epoch stays above 10, and the fetches send the
// epoch of the last batch in the log as LastFetchedEpoch, not the raised epoch the source
// never used (which the source would answer with DivergingEpoch forever): the mirror
// catches up again. The raise is not a leader-epoch cache entry (the cache follows the
// batch epochs): OffsetForLeaderEpoch for the source epoch answers the LEO, and a third
// cluster mirroring the topic from this one catches up instead of being sent back to the
// raise point with DivergingEpoch on every fetch.
func TestEdgeRestartAfterStopFromKmirror(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	acl := a.client()
	createTopicOn(t, acl, "ep", 1)
	produce(t, []string{a.b.Addr()}, "ep", 5)
	eb := b.env()
	eb.createMirror("m1", a.b.Addr())
	eb.startTopics("m1", "ep")
	eb.waitCaughtUp(acl, "m1", "ep")
	eb.stopTopics("m1", "ep")
	l, err := b.b.Log("ep", 0)
	if err != nil {
		t.Fatal(err)
	}
	raised := l.LeaderEpoch()
	if raised < epochRaiseMargin {
		t.Fatalf("failover epoch %d", raised)
	}
	eb.startTopics("m1", "ep")
	eb.waitCaughtUp(acl, "m1", "ep")
	produce(t, []string{a.b.Addr()}, "ep", 3)
	eb.waitCaughtUp(acl, "m1", "ep")
	sameBatches(t, "ep-0 mirrored again", sourceBatches(t, acl, "ep", 0), localBatches(t, l))
	if got := l.LeaderEpoch(); got < raised {
		t.Fatalf("leader epoch %d after the restart, was %d", got, raised)
	}
	bcl := b.client()
	srcEpoch := l.EpochForOffset(l.LogEndOffset() - 1)
	if e, end := offsetForLeaderEpoch(t, bcl, "ep", srcEpoch); e != srcEpoch || end != l.LogEndOffset() {
		t.Fatalf("OffsetForLeaderEpoch(%d) on B = epoch %d end %d, want epoch %d end %d (the LEO)", srcEpoch, e, end, srcEpoch, l.LogEndOffset())
	}
	c := startBroker(t)
	ec := c.env()
	ec.createMirror("from-b", b.b.Addr())
	ec.startTopics("from-b", "ep")
	ec.waitCaughtUp(bcl, "from-b", "ep")
	sameBatches(t, "ep-0 mirrored from B to C", localBatches(t, l), c.log("ep", 0))
	if d := eb.describe("m1", "ep")[0]; d.TruncatedOffset != 5 || d.TruncatedRecords != 1 {
		t.Fatalf("truncation report: %+v", d)
	}
}
