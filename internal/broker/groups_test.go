package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/group"
)

// groupProps lets tests use short session timeouts.
var groupProps = map[string]string{"group.min.session.timeout.ms": "500", "num.partitions": "1"}

// killableDialer dials normally until kill, which closes every connection it made and
// fails later dials: the client dies as a kill -9 would, without leaving its group.
type killableDialer struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (d *killableDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errors.New("killed")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		c.Close()
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func produceN(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 12), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestGroupKilledMemberPartitionsReassigned: three group consumers share 12 partitions;
// one is killed without leaving; once its session times out its partitions go to the
// others; every record is consumed at least once and the committed offsets reach the
// end offsets.
func TestGroupKilledMemberPartitionsReassigned(t *testing.T) {
	for _, bal := range []kgo.GroupBalancer{kgo.CooperativeStickyBalancer(), kgo.RangeBalancer()} {
		t.Run(bal.ProtocolName(), func(t *testing.T) {
			b := brokertest.Start(t, groupProps)
			prod := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
			adm := kadm.NewClient(prod)
			topic, groupID := "kill-"+bal.ProtocolName(), "g-"+bal.ProtocolName()
			if _, err := adm.CreateTopic(context.Background(), 12, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			seen := map[[2]int64]bool{}
			assigned := make([]atomic.Int32, 3)
			dialers := make([]*killableDialer, 3)
			clients := make([]*kgo.Client, 3)
			for i := range clients {
				i := i
				dialers[i] = &killableDialer{}
				clients[i] = b.Client(kgo.Dialer(dialers[i].dial), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
					kgo.Balancers(bal), kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
					kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
					kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
						assigned[i].Add(int32(len(m[topic])))
					}))
				go func(cl *kgo.Client) {
					for {
						fs := cl.PollFetches(context.Background())
						if fs.IsClientClosed() {
							return
						}
						mu.Lock()
						fs.EachRecord(func(r *kgo.Record) { seen[[2]int64{int64(r.Partition), r.Offset}] = true })
						mu.Unlock()
						cl.CommitRecords(context.Background(), fs.Records()...)
					}
				}(clients[i])
			}
			t.Cleanup(func() {
				// Close in parallel but wait: brokertest closes each client again
				// afterwards, and concurrent Closes of one kgo client race (both
				// kill its fetch session).
				var wg sync.WaitGroup
				for _, cl := range clients {
					wg.Add(1)
					go func() { defer wg.Done(); cl.Close() }()
				}
				wg.Wait()
			})
			produceN(t, prod, topic, 0, 600)
			waitFor(t, "three members with partitions", func() bool {
				return assigned[0].Load() > 0 && assigned[1].Load() > 0 && assigned[2].Load() > 0
			})
			dialers[2].kill()
			produceN(t, prod, topic, 600, 600)
			waitFor(t, "every record consumed", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(seen) == 1200
			})
			ends, err := adm.ListEndOffsets(context.Background(), topic)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "committed offsets at the end offsets", func() bool {
				offs, err := adm.FetchOffsets(context.Background(), groupID)
				if err != nil {
					return false
				}
				ok := true
				ends.Each(func(e kadm.ListedOffset) {
					c, found := offs.Lookup(topic, e.Partition)
					ok = ok && found && c.At == e.Offset
				})
				return ok
			})
			groups, err := adm.DescribeGroups(context.Background(), groupID)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(groups[groupID].Members); n != 2 {
				t.Fatalf("%d members after the kill, want 2", n)
			}
		})
	}
}

// TestGroupStaticMemberRestartKeepsAssignment: a static member (group.instance.id) that
// restarts within its session timeout gets its old partitions back and the group's
// generation does not change (no rebalance).
func TestGroupStaticMemberRestartKeepsAssignment(t *testing.T) {
	b := brokertest.Start(t, groupProps)
	adm := kadm.NewClient(b.Client())
	if _, err := adm.CreateTopic(context.Background(), 12, 1, nil, "static"); err != nil {
		t.Fatal(err)
	}
	type member struct {
		cl       *kgo.Client
		assigned atomic.Value // map[string][]int32
		revoked  atomic.Int32
	}
	start := func(id string) *member {
		m := &member{}
		m.cl = b.Client(kgo.ConsumerGroup("static-g"), kgo.ConsumeTopics("static"), kgo.InstanceID(id),
			kgo.Balancers(kgo.RangeBalancer()), kgo.SessionTimeout(20*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				if len(a) > 0 {
					m.assigned.Store(fmt.Sprint(a))
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
				if len(r) > 0 {
					m.revoked.Add(1)
				}
			}))
		go func() {
			for !m.cl.PollFetches(context.Background()).IsClientClosed() {
			}
		}()
		return m
	}
	a, other := start("a"), start("b")
	defer other.cl.Close()
	var gen int32
	waitFor(t, "a stable two-member group", func() bool {
		_, g1 := a.cl.GroupMetadata()
		_, g2 := other.cl.GroupMetadata()
		d, err := adm.DescribeGroups(context.Background(), "static-g")
		if err != nil || d["static-g"].State != "Stable" || len(d["static-g"].Members) != 2 || g1 != g2 || g1 <= 0 {
			return false
		}
		gen = g1
		return a.assigned.Load() != nil && other.assigned.Load() != nil
	})
	before, revokes := a.assigned.Load(), other.revoked.Load()
	a.cl.Close() // a static member does not leave the group on close
	a2 := start("a")
	defer a2.cl.Close()
	waitFor(t, "the restarted static member's assignment", func() bool { return a2.assigned.Load() != nil })
	if got := a2.assigned.Load(); got != before {
		t.Fatalf("restarted static member got %v, had %v", got, before)
	}
	if _, g := a2.cl.GroupMetadata(); g != gen {
		t.Fatalf("generation changed from %d to %d on a static member restart", gen, g)
	}
	if _, g := other.cl.GroupMetadata(); g != gen || other.revoked.Load() != revokes {
		t.Fatalf("the other member saw a rebalance: generation %d (was %d), %d revokes (was %d)", g, gen, other.revoked.Load(), revokes)
	}
}

// TestGroupOffsetsSurviveRestart: committed offsets describe the same after a broker
// restart, and a consumer of the group resumes from them.
func TestGroupOffsetsSurviveRestart(t *testing.T) {
	b := brokertest.Start(t, groupProps)
	prod := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(prod)
	if _, err := adm.CreateTopic(context.Background(), 12, 1, nil, "durable"); err != nil {
		t.Fatal(err)
	}
	produceN(t, prod, "durable", 0, 120)
	cons := b.Client(kgo.ConsumerGroup("dur-g"), kgo.ConsumeTopics("durable"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n := 0
	for n < 120 {
		fs := cons.PollFetches(context.Background())
		n += len(fs.Records())
		if err := cons.CommitRecords(context.Background(), fs.Records()...); err != nil {
			t.Fatal(err)
		}
	}
	cons.Close()
	before, err := adm.FetchOffsets(context.Background(), "dur-g")
	if err != nil || len(before.Offsets().Sorted()) != 12 {
		t.Fatal(before, err)
	}
	prod.Close()
	b.Restart()
	prod = b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer prod.Close()
	adm = kadm.NewClient(prod)
	var after kadm.OffsetResponses
	waitFor(t, "offsets after restart", func() bool {
		after, err = adm.FetchOffsets(context.Background(), "dur-g")
		return err == nil && after.Error() == nil
	})
	for _, o := range before.Offsets().Sorted() {
		a, ok := after.Lookup(o.Topic, o.Partition)
		if !ok || a.At != o.At {
			t.Fatalf("%s-%d committed %d before the restart, %v after", o.Topic, o.Partition, o.At, a)
		}
	}
	produceN(t, prod, "durable", 120, 12)
	cons = b.Client(kgo.ConsumerGroup("dur-g"), kgo.ConsumeTopics("durable"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cons.Close()
	var got []string
	for len(got) < 12 {
		cons.PollFetches(context.Background()).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for _, v := range got {
		if v < "v120" && len(v) <= 4 {
			t.Fatalf("resumed consumer re-read %s", v)
		}
	}
}

// TestGroupBadInput: stale generation, unknown member, empty and too long group IDs and
// commits to a missing topic get Kafka's errors, and the group's offsets are intact.
func TestGroupBadInput(t *testing.T) {
	b := brokertest.Start(t, groupProps)
	cl := b.Client()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "bad"); err != nil {
		t.Fatal(err)
	}
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	br := cl.Broker(int(meta.Brokers[0].NodeID)) // the coordinator of every group
	join := func(groupID, memberID string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = groupID, memberID, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := join("", ""); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("JoinGroup with an empty group ID: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r := join("bad-g", "")
	if r.ErrorCode == kerr.MemberIDRequired.Code {
		r = join("bad-g", r.MemberID)
	}
	if r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "bad-g", r.MemberID, r.Generation
	if sr, err := sync.RequestWith(ctx, br); err != nil || sr.ErrorCode != 0 {
		t.Fatal(err, sr)
	}
	commit := func(groupID, member string, gen int32, topic string, offset int64) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.MemberID, req.Generation = groupID, member, gen
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if e := commit("bad-g", r.MemberID, r.Generation, "bad", 7); e != 0 {
		t.Fatalf("valid commit: %v", kerr.ErrorForCode(e))
	}
	for _, c := range []struct {
		name, group, member string
		gen                 int32
		topic               string
		want                *kerr.Error
	}{
		{"stale generation", "bad-g", r.MemberID, r.Generation - 1, "bad", kerr.IllegalGeneration},
		{"unknown member", "bad-g", "nobody", r.Generation, "bad", kerr.UnknownMemberID},
		{"group ID too long", strings.Repeat("g", group.MaxGroupIDLen+1), "", -1, "bad", kerr.InvalidGroupID},
		{"missing topic", "bad-g", r.MemberID, r.Generation, "no-such-topic", kerr.UnknownTopicOrPartition},
	} {
		if e := commit(c.group, c.member, c.gen, c.topic, 99); e != c.want.Code {
			t.Errorf("%s: got %v, want %v", c.name, kerr.ErrorForCode(e), c.want)
		}
	}
	offs, err := adm.FetchOffsets(ctx, "bad-g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("bad", 0); !ok || o.At != 7 || len(offs["no-such-topic"]) != 0 {
		t.Fatalf("offsets after bad commits: %+v", offs)
	}
}

// TestConsumerOffsetsStaysBounded: with small segments for __consumer_offsets and a
// fast cleaner, continuous commits of the same keys stop growing the offsets topic.
func TestConsumerOffsetsStaysBounded(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"offsets.topic.segment.bytes": "16384",
		"offsets.topic.num.partitions": "1", "log.cleaner.backoff.ms": "100", "num.partitions": "4"})
	cl := b.Client()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "committed"); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		logs, _ := filepath.Glob(filepath.Join(b.Dir, "__consumer_offsets-0", "*.log"))
		var n int64
		for _, f := range logs {
			if st, err := os.Stat(f); err == nil {
				n += st.Size()
			}
		}
		return n
	}
	commitRound := func(i int) {
		offs := kadm.Offsets{}
		for p := int32(0); p < 4; p++ {
			offs.Add(kadm.Offset{Topic: "committed", Partition: p, At: int64(i)})
		}
		if r, err := adm.CommitOffsets(ctx, "bounded-g", offs); err != nil || r.Error() != nil {
			t.Fatal(err, r.Error())
		}
	}
	// 6000 rounds of 4 offsets: about 1.8 MB uncompacted, over 100 segments of 16 KiB.
	for i := range 6000 {
		commitRound(i)
	}
	// Bounded: the cleaner brings it under 4 segments' worth (the active segment is never
	// cleaned, so the exact size depends on where it is; a bound, not an equality).
	var last int64
	waitFor(t, "__consumer_offsets cleaned to a bounded size", func() bool {
		last = size()
		return last <= 4*16384
	})
	offs, err := adm.FetchOffsets(ctx, "bounded-g")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("committed", 3); o.At != 5999 {
		t.Fatalf("committed offset %d after cleaning, want 5999", o.At)
	}
}
