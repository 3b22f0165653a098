package partition

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/storage"
)

// replicated is a leader (this broker, 1) of t-0 with replicas 1, 2, 3, the given ISR and
// min.insync.replicas, over a real log; brokers 1–3 are registered with epoch 10 + ID.
type replicated struct {
	t    *testing.T
	rm   *ReplicaManager
	p    *Partition
	g    images
	id   metadata.TopicID
	reg  *metadata.PartitionRegistration
	ch   []Change
	minI int32
}

func newReplicated(t *testing.T, isr []int32, minIsr int32) *replicated {
	t.Helper()
	r := &replicated{t: t, id: metadata.NewTopicID(), minI: minIsr}
	logs, err := storage.OpenManager(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	r.rm = NewReplicaManager(Options{NodeID: self, Logs: logs,
		Config:            func(*metadata.Topic) storage.Config { return replicatedConfig() },
		MinInsyncReplicas: func(*metadata.Topic) int32 { return r.minI },
		OnChange:          func(c Change) { r.ch = append(r.ch, c) }})
	r.apply(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: isr, Leader: self, LeaderEpoch: 1, PartitionEpoch: 1})
	r.p = r.rm.Get("t", 0)
	return r
}

// apply makes reg t-0's registration in a new image.
func (r *replicated) apply(reg *metadata.PartitionRegistration) {
	r.t.Helper()
	r.applyTopic(topic("t", r.id, reg))
	r.reg = reg
}

// applyTopic makes tp (topic t, one partition) the topic of a new image.
func (r *replicated) applyTopic(tp *metadata.Topic) {
	r.t.Helper()
	im := r.g.next(tp)
	im.Brokers = map[int32]*metadata.BrokerRegistration{}
	for id := int32(1); id <= 3; id++ {
		im.Brokers[id] = &metadata.BrokerRegistration{ID: id, Epoch: 10 + int64(id)}
	}
	if err := r.rm.Apply(im); err != nil {
		r.t.Fatal(err)
	}
}

// fetchAll records a fetch from offset of each follower in ids, in order.
func (r *replicated) fetchAll(offset int64, ids ...int32) {
	r.t.Helper()
	for _, id := range ids {
		if err := r.fetch(id, offset); err != nil {
			r.t.Fatal(err)
		}
	}
}

// produce appends n one-record batches as leader.
func (r *replicated) produce(n int) {
	r.t.Helper()
	for range n {
		if _, err := r.p.AppendAsLeader(batch(), -1, false); err != nil {
			r.t.Fatal(err)
		}
	}
}

// fetch records a fetch of follower id from offset, as the broker's fetch does.
func (r *replicated) fetch(id int32, offset int64) error {
	return r.p.UpdateFollowerFetchState(FollowerFetch{ReplicaID: id, BrokerEpoch: 10 + int64(id), FetchOffset: offset,
		LeaderLEO: r.p.Log().LogEndOffset(), NowMs: time.Now().UnixMilli()})
}

func (r *replicated) hw() int64 { return r.p.Log().HighWatermark() }

// TestHighWatermarkFollowsTheISR: the leader's HW is the lowest LEO of the ISR; it does
// not move before every ISR member has fetched (their LEOs are unknown to a new leader),
// moves as the slowest catches up, and never goes back when a fetch reports less.
func TestHighWatermarkFollowsTheISR(t *testing.T) {
	r := newReplicated(t, []int32{1, 2, 3}, 2)
	r.produce(3)
	if r.hw() != 0 {
		t.Fatalf("HW %d before any follower fetched, want 0", r.hw())
	}
	if err := r.fetch(2, 3); err != nil {
		t.Fatal(err)
	}
	if r.hw() != 0 {
		t.Fatalf("HW %d with follower 3's LEO unknown, want 0", r.hw())
	}
	if err := r.fetch(3, 2); err != nil {
		t.Fatal(err)
	}
	if r.hw() != 2 {
		t.Fatalf("HW %d, want 2 (follower 3's LEO)", r.hw())
	}
	if err := r.fetch(3, 3); err != nil {
		t.Fatal(err)
	}
	if r.hw() != 3 {
		t.Fatalf("HW %d, want 3", r.hw())
	}
	if err := r.fetch(3, 1); err != nil {
		t.Fatal(err)
	}
	if r.hw() != 3 {
		t.Fatalf("HW went back to %d", r.hw())
	}
}

// TestHighWatermarkFrozenUnderMinIsr: with fewer ISR members than min.insync.replicas the
// HW does not move and an acks=all append is refused before it is written
// (NOT_ENOUGH_REPLICAS); min.insync.replicas above the replication factor counts as the
// replication factor.
func TestHighWatermarkFrozenUnderMinIsr(t *testing.T) {
	r := newReplicated(t, []int32{1}, 2)
	r.produce(2)
	if r.hw() != 0 {
		t.Fatalf("HW %d under min ISR, want 0", r.hw())
	}
	leo := r.p.Log().LogEndOffset()
	if _, err := r.p.AppendAsLeader(batch(), -1, true); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all under min ISR: %v, want ErrNotEnoughReplicas", err)
	}
	if r.p.Log().LogEndOffset() != leo {
		t.Fatal("a refused acks=all write was appended")
	}
	r.minI = 5 // above RF 3: the ISR must hold all three
	r.apply(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: self, LeaderEpoch: 1, PartitionEpoch: 2})
	r.fetchAll(leo, 2, 3)
	if r.hw() != leo {
		t.Fatalf("HW %d with the whole ISR at %d, want %d", r.hw(), leo, leo)
	}
}

// TestMinIsrChangeAppliesAtOnce: lowering the topic's min.insync.replicas with no
// registration change lets the HW of a leader alone in its ISR advance over the acks=1
// writes it already holds (it was frozen under the old min ISR).
func TestMinIsrChangeAppliesAtOnce(t *testing.T) {
	r := newReplicated(t, []int32{1}, 2)
	r.produce(3)
	if r.hw() != 0 {
		t.Fatalf("HW %d under min ISR 2 with ISR [1], want 0", r.hw())
	}
	r.minI = 1
	tp := topic("t", r.id, r.reg)
	tp.Configs = map[string]string{"min.insync.replicas": "1"} // a config change, same registration
	r.applyTopic(tp)
	if leo := r.p.Log().LogEndOffset(); r.hw() != leo {
		t.Fatalf("HW %d after min.insync.replicas=1, want the LEO %d", r.hw(), leo)
	}
}

// TestWaitReplicated: an acks=all write waits until the ISR has it, then returns nil;
// it returns NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min ISR by then,
// ErrNotLeader when leadership moves, and the context's error at the timeout.
func TestWaitReplicated(t *testing.T) {
	r := newReplicated(t, []int32{1, 2}, 2)
	la, err := r.p.AppendAsLeader(batch(), -1, true)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.p.WaitReplicated(context.Background(), la.LeaderEpoch, la.LastOffset+1) }()
	select {
	case err := <-done:
		t.Fatalf("returned %v before the follower fetched", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := r.fetch(2, la.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("after the ISR fetched: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	la, _ = r.p.AppendAsLeader(batch(), -1, true)
	if err := r.p.WaitReplicated(ctx, la.LeaderEpoch, la.LastOffset+1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout: %v", err)
	}

	// the write reaches the HW with the ISR down to the leader (follower 2 reassigned
	// away, min ISR 1 for a moment), and min ISR is 2 again when the wait checks it
	r.minI = 1
	r.apply(&metadata.PartitionRegistration{Replicas: []int32{1, 3}, ISR: []int32{1}, Leader: self, LeaderEpoch: 1, PartitionEpoch: 2})
	if r.hw() != la.LastOffset+1 {
		t.Fatalf("HW %d with the leader alone in the ISR, want its LEO %d", r.hw(), la.LastOffset+1)
	}
	r.minI = 2
	r.apply(&metadata.PartitionRegistration{Replicas: []int32{1, 3}, ISR: []int32{1}, Leader: self, LeaderEpoch: 1, PartitionEpoch: 3})
	if err := r.p.WaitReplicated(context.Background(), la.LeaderEpoch, la.LastOffset+1); !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("ISR below min ISR at the HW: %v, want ErrNotEnoughReplicasAfterAppend", err)
	}

	la, _ = r.p.AppendAsLeader(batch(), -1, false)
	go func() { done <- r.p.WaitReplicated(context.Background(), la.LeaderEpoch, la.LastOffset+10) }()
	r.apply(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 4})
	if err := <-done; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("after leadership moved: %v, want ErrNotLeader", err)
	}
}

// TestFollowerFetchChecks: a fetch from a broker with no replica is refused
// (ErrNotReplica); one with a broker epoch older than the one the broker is registered
// with, before it ever fetched, or older than its last fetch's, is stale
// (ErrStaleBrokerEpoch, Kafka's updateFetchStateOrThrow); none records anything.
func TestFollowerFetchChecks(t *testing.T) {
	r := newReplicated(t, []int32{1, 2, 3}, 1)
	r.produce(2)
	if err := r.p.CheckFollower(7, -1); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("non-replica: %v", err)
	}
	if err := r.p.UpdateFollowerFetchState(FollowerFetch{ReplicaID: 7, BrokerEpoch: -1, FetchOffset: 2, LeaderLEO: 2}); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("non-replica update: %v", err)
	}
	// Broker 3 is registered with epoch 13 and has not fetched yet.
	if err := r.p.CheckFollower(3, 12); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("epoch older than the registration's, no fetch before: %v", err)
	}
	if err := r.p.UpdateFollowerFetchState(FollowerFetch{ReplicaID: 3, BrokerEpoch: 12, FetchOffset: 2, LeaderLEO: 2}); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("epoch older than the registration's, update: %v", err)
	}
	if err := r.fetch(2, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.p.UpdateFollowerFetchState(FollowerFetch{ReplicaID: 2, BrokerEpoch: 5, FetchOffset: 2, LeaderLEO: 2}); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("stale broker epoch: %v", err)
	}
	r.p.lmu.Lock()
	leo := r.p.ls.replicas[2].leo
	r.p.lmu.Unlock()
	if leo != 1 {
		t.Fatalf("a refused fetch moved follower 2's LEO to %d", leo)
	}
	r.p.lmu.Lock()
	leo = r.p.ls.replicas[3].leo
	r.p.lmu.Unlock()
	if leo != unknownOffset {
		t.Fatalf("a refused fetch moved follower 3's LEO to %d", leo)
	}
}

// TestIsrChangesProposed: a follower that catches up to the HW and the start of the
// leader epoch is proposed for the ISR; one that stops fetching for
// replica.lag.time.max.ms is proposed out of it; one change is pending at a time, and a
// committed registration ends it.
func TestIsrChangesProposed(t *testing.T) {
	r := newReplicated(t, []int32{1, 2}, 1)
	r.produce(2)
	if err := r.fetch(2, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.fetch(3, 1); err != nil {
		t.Fatal(err)
	}
	proposed := func() []int32 {
		r.p.lmu.Lock()
		defer r.p.lmu.Unlock()
		return r.p.ls.isr.proposed
	}
	if p := proposed(); p != nil {
		t.Fatalf("proposed %v with follower 3 behind the HW", p)
	}
	if err := r.fetch(3, 2); err != nil {
		t.Fatal(err)
	}
	if p := proposed(); !slices.Equal(p, []int32{1, 2, 3}) {
		t.Fatalf("proposed %v, want [1 2 3]", p)
	}
	r.apply(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: self, LeaderEpoch: 1, PartitionEpoch: 2})
	if p := proposed(); p != nil {
		t.Fatalf("still proposed %v after the ISR was committed", p)
	}
	r.produce(1)
	if err := r.fetch(2, 3); err != nil {
		t.Fatal(err)
	}
	r.p.maybeShrinkIsr(time.Now().Add(time.Minute).UnixMilli(), 30000)
	if p := proposed(); !slices.Equal(p, []int32{1, 2}) {
		t.Fatalf("proposed %v a minute after follower 3 last caught up, want [1 2]", p)
	}
}

// TestAppendAsFollowerEpochFilter: a follower appends the leader's batches as they are,
// up to the first whose leader epoch is above the bound (the epoch it follows at,
// KAFKA-18723, or a mirror leader's MirrorLeaderEpoch), and refuses batches fetched at
// an epoch it no longer follows.
func TestAppendAsFollowerEpochFilter(t *testing.T) {
	var ch []Change
	rm := newManager(t, t.TempDir(), &ch)
	var g images
	id := metadata.NewTopicID()
	if err := rm.Apply(g.next(topic("t", id, reg(2, 5, 2, self)))); err != nil {
		t.Fatal(err)
	}
	p := rm.Get("t", 0)
	var buf []byte
	for i, e := range []int32{4, 5, 6, 5} {
		b := batch()
		b.SetBaseOffset(int64(i))
		b.SetLeaderEpoch(e)
		b.UpdateCRC()
		buf = append(buf, b...)
	}
	// A mirror leader vouching for epoch 4 only (MirrorLeaderEpoch): nothing past it.
	info, err := p.AppendAsFollower(5, 4, buf)
	if err != nil {
		t.Fatal(err)
	}
	if info.LastOffset != 0 || p.Log().LogEndOffset() != 1 {
		t.Fatalf("appended up to %d (LEO %d) with MirrorLeaderEpoch 4, want the first batch only", info.LastOffset, p.Log().LogEndOffset())
	}
	info, err = p.AppendAsFollower(5, 5, buf[len(buf)/4:])
	if err != nil {
		t.Fatal(err)
	}
	if info.LastOffset != 1 || p.Log().LogEndOffset() != 2 {
		t.Fatalf("appended up to %d (LEO %d), want the two batches before epoch 6", info.LastOffset, p.Log().LogEndOffset())
	}
	if _, err := p.AppendAsFollower(4, 4, buf[len(buf)/2:]); !errors.Is(err, ErrNotFollower) {
		t.Fatalf("append at an old epoch: %v", err)
	}
	if err := p.UpdateFollowerHighWatermark(5, 10, 0); err != nil || p.Log().HighWatermark() != 2 {
		t.Fatalf("follower HW %d (%v), want min(leader HW 10, LEO 2)", p.Log().HighWatermark(), err)
	}
}

// replicatedConfig is the broker's log config for partitions: the HW is the partition
// layer's (storage.Config.ExternalHighWatermark).
func replicatedConfig() storage.Config {
	c := storage.DefaultConfig()
	c.ExternalHighWatermark = true
	return c
}
