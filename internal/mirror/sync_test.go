package mirror

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// waitSynced waits until task of mirror on kb has completed a whole successful run that
// started after the call: two successes later than now.
func waitSynced(t *testing.T, kb *kbroker, mirror, task string) {
	t.Helper()
	since := time.Now().UnixMilli()
	seen := int64(-1)
	eventually(t, func() string { return fmt.Sprintf("no full %s run of %s after %d", task, mirror, since) }, func() bool {
		r := kb.m.runner(mirror)
		if r == nil {
			return false
		}
		for _, st := range r.status.snapshot() {
			if st.Task != task || st.LastSuccessMs <= since {
				continue
			}
			if seen < 0 {
				seen = st.LastSuccessMs
			} else if st.LastSuccessMs > seen {
				return true
			}
		}
		return false
	})
}

// commitOn commits offsets for group on a broker (a simple commit, generation -1).
func commitOn(t *testing.T, cl *kgo.Client, groupID, topic string, part int32, at int64, epoch int32, meta string) {
	t.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: part, At: at, LeaderEpoch: epoch, Metadata: meta})
	resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), groupID, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit %s %s-%d=%d: %v", groupID, topic, part, at, err)
	}
}

func produceN(t *testing.T, cl *kgo.Client, topic string, part int32, from, n int) {
	t.Helper()
	var rs []*kgo.Record
	for i := from; i < from+n; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: part, Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s-%d: %v", topic, part, err)
	}
}

func committed(kb *kbroker, groupID, topic string, part int32) (group.Offset, bool) {
	offs, _ := kb.b.Groups().CommittedOffsets(context.Background(), groupID)
	o, ok := offs[topic][part]
	return o, ok
}

// TestSyncDisasterRecovery is the disaster-recovery story of issue 5: producers write to
// the source continuously while a three-member group orders-app consumes and commits
// there; the source broker goes down; the destination fails over; the same group
// resumes on the destination. Nothing is skipped; the duplicates are bounded by what the
// group consumed in the sync interval before the disaster. In process the source is
// stopped with a clean Shutdown (not kill -9): the acceptance check sync-group-failover
// does the kill -9 with real processes.
func TestSyncDisasterRecovery(t *testing.T) {
	src, dst := startBroker(t), startBroker(t)
	scl := src.client(kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RetryTimeout(2*time.Second), kgo.ProducerLinger(0))
	createTopicOn(t, scl, "orders", 3)
	ed := dst.env()
	ed.createMirror("dr", src.b.Addr())
	ed.startTopics("dr", "orders")

	var mu sync.Mutex
	acked := map[string]bool{}
	type consumed struct {
		at time.Time
		v  string
	}
	var before []consumed
	ctx, stopProducing := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the producer: about 400 records/s until the disaster
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := strconv.Itoa(i)
			scl.Produce(ctx, &kgo.Record{Topic: "orders", Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[v] = true
					mu.Unlock()
				}
			})
			time.Sleep(2500 * time.Microsecond)
		}
	}()
	const commitEvery = 100 * time.Millisecond
	var members []*kgo.Client
	for i := 0; i < 3; i++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(src.b.Addr()), kgo.ConsumerGroup("orders-app"), kgo.ConsumeTopics("orders"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(commitEvery),
			kgo.RetryTimeout(time.Second), kgo.SessionTimeout(6*time.Second), kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				now := time.Now()
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) { before = append(before, consumed{now, string(r.Value)}) })
				mu.Unlock()
			}
		}()
	}
	// run until the group has consumed a good amount and several syncs happened
	eventually(t, func() string { return "the source group consumed too little" }, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(before) >= 800
	})
	waitSynced(t, dst, "dr", TaskGroupOffsets)

	// the disaster: the source broker goes down under the producer and the group
	disaster := time.Now()
	src.stop()
	stopProducing()
	wg.Wait()
	for _, cl := range members {
		cl.Close()
	}
	scl.Close()

	// failover on the destination; the topic is writable when StopMirrorTopics answers
	t0 := time.Now()
	ed.stopTopics("dr", "orders")
	dcl := dst.client()
	if err := dcl.ProduceSync(context.Background(), &kgo.Record{Topic: "orders", Value: []byte("after-failover")}).FirstErr(); err != nil {
		t.Fatalf("produce after failover: %v", err)
	}
	failoverTime := time.Since(t0)

	// what the destination holds (mirrored records before the failover record)
	onDest := map[string]bool{}
	rcl := dst.client(kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ends := sourceEnds(t, dcl, "orders")
	total := int64(0)
	for _, e := range ends {
		total += e
	}
	n := 0
	rctx := ctx0(t)
	for int64(n) < total-int64(len(ends)) { // the failover's MIRROR_PID_RESET (one per partition) takes an offset too
		fs := rcl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read %d of %d records from the destination", n, total-int64(len(ends)))
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if string(r.Value) != "after-failover" {
				onDest[string(r.Value)] = true
			}
		})
	}

	// the same group resumes on the destination
	after := map[string]int{}
	var resumed []*kgo.Client
	for i := 0; i < 3; i++ {
		resumed = append(resumed, dst.client(kgo.ConsumerGroup("orders-app"), kgo.ConsumeTopics("orders"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond)))
	}
	var amu sync.Mutex
	cctx, stopConsuming := context.WithCancel(context.Background())
	for _, cl := range resumed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				amu.Lock()
				fs.EachRecord(func(r *kgo.Record) { after[string(r.Value)]++ })
				amu.Unlock()
			}
		}()
	}
	beforeSet := map[string]bool{}
	for _, c := range before {
		beforeSet[c.v] = true
	}
	eventually(t, func() string { return "the resumed group did not reach the end" }, func() bool {
		amu.Lock()
		defer amu.Unlock()
		if after["after-failover"] == 0 {
			return false
		}
		for v := range onDest {
			if !beforeSet[v] && after[v] == 0 {
				return false
			}
		}
		return true
	})
	stopConsuming()
	wg.Wait()

	dups := 0
	for v := range after {
		if beforeSet[v] {
			dups++
		}
	}
	lost := 0
	for v := range acked {
		if !onDest[v] {
			lost++
		}
	}
	interval := time.Duration(fastConfig().RefreshIntervalMs) * time.Millisecond
	inWindow := func(d time.Duration) int {
		c := 0
		for _, x := range before {
			if disaster.Sub(x.at) <= d {
				c++
			}
		}
		return c
	}
	oneInterval := inWindow(interval + commitEvery)
	t.Logf("DR story: source consumed %d records, %d acked on the source, %d on the destination; "+
		"duplicates %d (group consumed %d in the last sync+commit interval of %v); RPO %d acked records lost; "+
		"failover to a writable topic %v", len(beforeSet), len(acked), len(onDest), dups, oneInterval, interval+commitEvery, lost, failoverTime)
	for v := range onDest {
		if !beforeSet[v] && after[v] == 0 {
			t.Fatalf("record %s skipped", v)
		}
	}
	// a sync interval plus one more for scheduling on a loaded machine
	if bound := inWindow(2*interval + commitEvery); dups > bound {
		t.Fatalf("%d duplicates, more than the %d records the group consumed in the sync interval before the disaster", dups, bound)
	}
}

func ctx0(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSyncActiveGroupKeepsOffsets: a group active on the destination keeps its own
// offsets, whether its member joined before the first sync or after one.
func TestSyncActiveGroupKeepsOffsets(t *testing.T) {
	src, dst := startBroker(t), startBroker(t)
	scl := src.client()
	createTopicOn(t, scl, "t", 1)
	produceN(t, scl, "t", 0, 0, 100)
	commitOn(t, scl, "early", "t", 0, 50, -1, "")
	commitOn(t, scl, "late", "t", 0, 60, -1, "src-meta")

	ed := dst.env()
	ed.createMirror("m", src.b.Addr())
	ed.startTopics("m", "t")
	ed.waitCaughtUp(scl, "m", "t")

	join := func(groupID string, at int64) *kgo.Client {
		cl := dst.client(kgo.ConsumerGroup(groupID), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit(),
			kgo.FetchMaxWait(100*time.Millisecond))
		eventually(t, func() string { return groupID + " never became Stable" }, func() bool {
			cl.PollRecords(ctx0(t), 1)
			st, _, _ := dst.b.Groups().GroupState(context.Background(), groupID)
			return st == "Stable"
		})
		var cerr error
		cl.CommitOffsetsSync(context.Background(), map[string]map[int32]kgo.EpochOffset{"t": {0: {Epoch: -1, Offset: at}}},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				if err == nil {
					err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
				}
				cerr = err
			})
		if cerr != nil {
			t.Fatalf("commit on the destination: %v", cerr)
		}
		return cl
	}
	// "early" is active on the destination before any sync of it
	joinEarly := join("early", 10)
	_ = joinEarly
	waitSynced(t, dst, "m", TaskGroupOffsets)
	if o, _ := committed(dst, "early", "t", 0); o.Offset != 10 {
		t.Fatalf("active group early: offset %d, want its own 10", o.Offset)
	}
	// "late" is synced while absent, then a member joins and commits its own offset
	eventually(t, func() string { return "late not synced" }, func() bool {
		o, ok := committed(dst, "late", "t", 0)
		return ok && o.Offset == 60 && o.Metadata == "src-meta"
	})
	join("late", 20)
	commitOn(t, scl, "late", "t", 0, 90, -1, "")
	commitOn(t, scl, "early", "t", 0, 95, -1, "")
	waitSynced(t, dst, "m", TaskGroupOffsets)
	if o, _ := committed(dst, "late", "t", 0); o.Offset != 20 {
		t.Fatalf("active group late: offset %d, want its own 20", o.Offset)
	}
	if o, _ := committed(dst, "early", "t", 0); o.Offset != 10 {
		t.Fatalf("active group early: offset %d, want its own 10", o.Offset)
	}
}

// TestSyncClamping: a source commit beyond the destination LEO lands at the LEO, one
// below the destination log start lands at the log start, both with the leader epoch of
// the destination epoch cache; an unclamped offset keeps its epoch and offset 0 is synced.
func TestSyncClamping(t *testing.T) {
	src, dst := startBroker(t), startBroker(t)
	scl := src.client()
	createTopicOn(t, scl, "c", 1)
	produceN(t, scl, "c", 0, 0, 100)
	commitOn(t, scl, "zero", "c", 0, 0, -1, "")
	commitOn(t, scl, "beyond", "c", 0, 1000, 77, "")
	commitOn(t, scl, "mid", "c", 0, 30, 0, "m")

	ed := dst.env()
	ed.createMirror("m", src.b.Addr())
	ed.startTopics("m", "c")
	ed.waitCaughtUp(scl, "m", "c")
	l, err := dst.b.Log("c", 0)
	if err != nil {
		t.Fatal(err)
	}
	cacheEpoch := l.EpochEntries()[len(l.EpochEntries())-1].Epoch
	want := func(groupID string, off int64, epoch int32) {
		t.Helper()
		var got group.Offset
		eventually(t, func() string { return fmt.Sprintf("%s: %+v, want offset %d epoch %d", groupID, got, off, epoch) }, func() bool {
			got, _ = committed(dst, groupID, "c", 0)
			return got.Offset == off && got.LeaderEpoch == epoch
		})
	}
	want("zero", 0, -1)
	want("beyond", 100, cacheEpoch)
	want("mid", 30, 0)

	// the source log start moves to 50; the mirror follows; a commit below lands there
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "c"
	rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 50}}
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(context.Background(), scl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("DeleteRecords: %v %+v", err, resp)
	}
	produceN(t, scl, "c", 0, 100, 1) // a fetch response carries the new log start
	commitOn(t, scl, "below", "c", 0, 10, 0, "")
	eventually(t, func() string { return "destination log start did not follow" }, func() bool { return l.LogStartOffset() == 50 })
	want("below", 50, cacheEpoch)
}

// TestSyncTopicConfigs: the source's explicitly set configs are copied at creation and
// followed; excluded keys are not; a local change to a synced key is undone.
func TestSyncTopicConfigs(t *testing.T) {
	src, dst := startBroker(t), startBroker(t)
	scl := src.client()
	req := kmsgCreateTopic("cfg", 1)
	for k, v := range map[string]string{"retention.ms": "3600000", "cleanup.policy": "compact", "max.message.bytes": "2000000",
		"min.insync.replicas": "1", "message.timestamp.type": "LogAppendTime"} {
		req.Topics[0].Configs = append(req.Topics[0].Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: kmsg.StringPtr(v)})
	}
	if resp, err := req.RequestWith(context.Background(), scl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	ed := dst.env()
	ed.createMirror("m", src.b.Addr())
	ed.startTopics("m", "cfg")
	configs := func() map[string]string { return dst.b.Metadata().Image().Topics["cfg"].Configs }
	check := func(want map[string]string) {
		t.Helper()
		eventually(t, func() string { return fmt.Sprintf("configs %v, want %v", configs(), want) }, func() bool {
			c := configs()
			for k, v := range want {
				if c[k] != v {
					return false
				}
			}
			return true
		})
		for _, k := range []string{"min.insync.replicas", "message.timestamp.type"} {
			if v, ok := configs()[k]; ok {
				t.Fatalf("excluded key %s synced: %s", k, v)
			}
		}
	}
	// copied at creation
	if c := configs(); c["retention.ms"] != "3600000" || c["cleanup.policy"] != "compact" || c["max.message.bytes"] != "2000000" {
		t.Fatalf("configs at creation: %v", c)
	}
	check(map[string]string{"retention.ms": "3600000"})

	alter := func(cl *kgo.Client, k, v string) {
		t.Helper()
		resp, err := kadm.NewClient(cl).AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: k, Value: kmsg.StringPtr(v)}}, "cfg")
		if err == nil {
			_, err = resp.On("cfg", nil)
		}
		if err == nil {
			err = resp[0].Err
		}
		if err != nil {
			t.Fatalf("alter %s=%s: %v", k, v, err)
		}
	}
	alter(scl, "retention.ms", "7200000")
	check(map[string]string{"retention.ms": "7200000", "cleanup.policy": "compact", "max.message.bytes": "2000000"})
	// a local edit of a synced key is reverted
	alter(dst.client(), "max.message.bytes", "1000")
	eventually(t, func() string { return "local edit took" }, func() bool { return configs()["max.message.bytes"] == "1000" })
	check(map[string]string{"max.message.bytes": "2000000"})
}

// TestSyncPartitionGrowth: a source topic grown from 3 to 6 partitions grows on the
// destination and the new partitions mirror.
func TestSyncPartitionGrowth(t *testing.T) {
	src, dst := startBroker(t), startBroker(t)
	scl := src.client()
	createTopicOn(t, scl, "grow", 3)
	for p := int32(0); p < 3; p++ {
		produceN(t, scl, "grow", p, 0, 5)
	}
	ed := dst.env()
	ed.createMirror("m", src.b.Addr())
	ed.startTopics("m", "grow")
	ed.waitCaughtUp(scl, "m", "grow")
	if _, err := kadm.NewClient(scl).CreatePartitions(context.Background(), 3, "grow"); err != nil {
		t.Fatal(err)
	}
	pcl := src.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(3); p < 6; p++ {
		produceN(t, pcl, "grow", p, 0, 7)
	}
	eventually(t, func() string { return "destination did not grow" }, func() bool {
		return dst.b.Metadata().Image().Topics["grow"].Partitions == 6
	})
	ed.waitCaughtUp(scl, "m", "grow")
}

// TestSyncDiscovery: with topics.include=orders-.*, a new source topic orders-eu starts by
// itself and mirrors; __consumer_offsets is never mirrored even when a pattern names it;
// changing topics.exclude through IncrementalAlterConfigs on the mirror stops the active
// topic, which is not rediscovered.
func TestSyncDiscovery(t *testing.T) {
	src, dst := startBroker(t), startBroker(t)
	scl := src.client()
	createTopicOn(t, scl, "payments", 1)
	commitOn(t, scl, "g", "payments", 0, 0, -1, "") // __consumer_offsets has data
	ed := dst.env()
	ed.createMirror("m", src.b.Addr(), "topics.include", "orders-.*,__consumer_offsets", "topics.exclude", "nothing")
	createTopicOn(t, scl, "orders-eu", 2)
	produceN(t, scl, "orders-eu", 1, 0, 10)
	eventually(t, func() string { return "orders-eu not discovered" }, func() bool {
		tt := dst.b.Metadata().Image().Topics["orders-eu"]
		return tt != nil && tt.Mirror != nil && tt.Mirror.MirrorName == "m"
	})
	ed.waitCaughtUp(scl, "m", "orders-eu")
	waitSynced(t, dst, "m", TaskTopicDiscovery)
	im := dst.b.Metadata().Image()
	if tt := im.Topics["payments"]; tt != nil {
		t.Fatalf("payments mirrored: %+v", tt)
	}
	if tt := im.Topics["__consumer_offsets"]; tt == nil || tt.Mirror != nil {
		t.Fatalf("__consumer_offsets mirrored: %+v", tt)
	}

	// exclude it through IncrementalAlterConfigs on the CLUSTER_MIRROR resource
	setMirrorConfig(t, dst.client(), "m", "topics.exclude", "orders-eu")
	ed.waitState("m", "orders-eu", mirrorproto.StateStopped)
	waitSynced(t, dst, "m", TaskTopicDiscovery)
	if tt := dst.b.Metadata().Image().Topics["orders-eu"]; tt.Mirror == nil || tt.Mirror.Desired != metadata.DesiredStopped {
		t.Fatalf("orders-eu after exclusion: %+v", tt.Mirror)
	}
	// writable now
	if err := dst.client().ProduceSync(context.Background(), &kgo.Record{Topic: "orders-eu", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce to the stopped topic: %v", err)
	}
}

// setMirrorConfig sets key=value on mirror through IncrementalAlterConfigs on the
// CLUSTER_MIRROR resource.
func setMirrorConfig(t *testing.T, cl *kgo.Client, mirror, key, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceType(mirrorproto.ConfigResourceTypeClusterMirror)
	rr.ResourceName = mirror
	rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: key, Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr(value)}}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs %s=%s: %v %+v", key, value, err, resp)
	}
}

// TestSyncStatusLogsChangesOnly: through a source outage every task fails on every
// refresh; each is logged at WARN when it starts failing, when its error changes and
// every failureLogEvery, and at INFO when it succeeds again, while describe and the
// metrics count every failure.
func TestSyncStatusLogsChangesOnly(t *testing.T) {
	s := newSyncStatus()
	errA, errB := fmt.Errorf("connection refused"), fmt.Errorf("timeout")
	steps := []struct {
		err  error
		back time.Duration // move the last WARN back by this much first
		want bool
	}{
		{nil, 0, false},
		{errA, 0, true},
		{errA, 0, false},
		{errB, 0, true},
		{errB, 0, false},
		{errB, failureLogEvery, true},
		{nil, 0, true},
		{nil, 0, false},
	}
	for i, st := range steps {
		s.tasks[TaskGroupOffsets].loggedAt = s.tasks[TaskGroupOffsets].loggedAt.Add(-st.back)
		if got := s.record(TaskGroupOffsets, st.err); got != st.want {
			t.Fatalf("step %d (%v): log %v, want %v", i, st.err, got, st.want)
		}
	}
	if n := s.tasks[TaskGroupOffsets].errors; n != 5 {
		t.Fatalf("errors counted: %d, want 5", n)
	}
}
