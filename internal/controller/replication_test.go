package controller

// Tests of the controller's replication decisions over a real metadata log
// (metadata.Open, one node): brokers registered and heartbeating through the controller's
// own RPCs, RF 3 topics placed by Place and PartitionRecords.

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
)

// testCluster is an active controller over a real one-node metadata log, with the brokers
// it registered.
type testCluster struct {
	t      *testing.T
	ctx    context.Context
	q      *metadata.Controller
	c      *Controller
	epochs map[int32]int64
}

func newTestCluster(t *testing.T, opts Options, brokers ...int32) *testCluster {
	t.Helper()
	q, err := metadata.Open(metadata.Options{Dir: t.TempDir(), NodeID: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	opts.NodeID = 1
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = time.Hour
	}
	tc := &testCluster{t: t, ctx: t.Context(), q: q, c: New(q, opts), epochs: map[int32]int64{}}
	tc.c.step(tc.ctx)
	if !tc.c.Active() {
		t.Fatal("the controller did not become active")
	}
	for _, id := range brokers {
		tc.register(id, fmt.Sprintf("rack%d", id))
		tc.heartbeat(id, nil)
	}
	return tc
}

func (tc *testCluster) image() *metadata.Image { return tc.q.Image() }

// register registers broker id (fenced) and returns its broker epoch.
func (tc *testCluster) register(id int32, rack string) int64 {
	tc.t.Helper()
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.ClusterID, req.IncarnationID, req.Rack = id, tc.image().ClusterID, metadata.NewTopicID(), &rack
	req.PreviousBrokerEpoch = -1
	if e, ok := tc.epochs[id]; ok {
		req.PreviousBrokerEpoch = e // a restart after a clean shutdown
	}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", uint16(9000+id)
	req.Listeners = append(req.Listeners, l)
	resp := tc.c.RegisterBroker(tc.ctx, req)
	if resp.ErrorCode != 0 {
		tc.t.Fatalf("register %d: %v", id, kerr.ErrorForCode(resp.ErrorCode))
	}
	tc.epochs[id] = resp.BrokerEpoch
	return resp.BrokerEpoch
}

// heartbeat sends broker id's heartbeat, caught up with the image; edit sets its flags.
func (tc *testCluster) heartbeat(id int32, edit func(*kmsg.BrokerHeartbeatRequest)) *kmsg.BrokerHeartbeatResponse {
	tc.t.Helper()
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset = id, tc.epochs[id], int64(tc.image().Offset)
	if edit != nil {
		edit(req)
	}
	resp := tc.c.Heartbeat(tc.ctx, req)
	if resp.ErrorCode != 0 {
		tc.t.Fatalf("heartbeat %d: %v", id, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

// createTopic creates topic name with n partitions of rf replicas, placed by Place.
func (tc *testCluster) createTopic(name string, n int32, rf int16, configs map[string]string) *metadata.Topic {
	tc.t.Helper()
	im := tc.image()
	assign, err := Place(im, n, rf, nil, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		tc.t.Fatal(err)
	}
	id := metadata.NewTopicID()
	parts, err := PartitionRecords(im, id, 0, assign)
	if err != nil {
		tc.t.Fatal(err)
	}
	recs := append([]metadata.Record{metadata.TopicRecord{Name: name, ID: id, Partitions: n, Configs: configs}}, parts...)
	out, err := tc.q.Apply(tc.ctx, recs...)
	if err != nil {
		tc.t.Fatal(err)
	}
	return out.Topics[name]
}

// reg is the current registration of partition p of topic name.
func (tc *testCluster) reg(name string, p int32) *metadata.PartitionRegistration {
	return tc.image().Topics[name].Partition(p)
}

// setPartition makes partition p of topic name what want says (leader, ISR, recovery
// state), as a controller change would.
func (tc *testCluster) setPartition(name string, p int32, leader int32, isr []int32) {
	tc.t.Helper()
	t := tc.image().Topics[name]
	reg := t.Partition(p)
	rec := metadata.PartitionChangeRecord{TopicID: t.ID, Partition: p, ISR: isr, LeaderEpoch: reg.LeaderEpoch}
	if leader != reg.Leader {
		rec.Leader = &leader
		rec.LeaderEpoch++
	}
	if _, err := tc.q.Apply(tc.ctx, rec); err != nil {
		tc.t.Fatal(err)
	}
}

// alter sends an AlterPartition v3 from the partition's leader proposing isr with the
// brokers' current epochs; edit adjusts the request.
func (tc *testCluster) alter(name string, p int32, isr []int32, edit func(*kmsg.AlterPartitionRequest, *kmsg.AlterPartitionRequestTopicPartition)) *kmsg.AlterPartitionResponse {
	tc.t.Helper()
	t := tc.image().Topics[name]
	reg := t.Partition(p)
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	req.BrokerID, req.BrokerEpoch = reg.Leader, tc.epochs[reg.Leader]
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = t.ID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch, rp.LeaderRecoveryState = p, reg.LeaderEpoch, reg.PartitionEpoch, reg.LeaderRecoveryState
	for _, id := range isr {
		s := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		s.BrokerID, s.BrokerEpoch = id, tc.epochs[id]
		rp.NewEpochISR = append(rp.NewEpochISR, s)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if edit != nil {
		edit(req, &req.Topics[0].Partitions[0])
	}
	return tc.c.AlterPartition(tc.ctx, req)
}

// partitionAnswer is the only partition answer of an AlterPartition response.
func partitionAnswer(t *testing.T, resp *kmsg.AlterPartitionResponse) kmsg.AlterPartitionResponseTopicPartition {
	t.Helper()
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("AlterPartition answer: error %v, %+v", kerr.ErrorForCode(resp.ErrorCode), resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

// TestPlaceRF3 places RF 3 partitions over three racked brokers: every partition has
// three distinct replicas, leaders and followers are striped evenly, and a fenced broker
// takes replicas but neither leadership nor a place in the new partitions' ISRs.
func TestPlaceRF3(t *testing.T) {
	tc := newTestCluster(t, Options{}, 1, 2, 3)
	topic := tc.createTopic("t", 6, 3, nil)
	leaders, seconds := map[int32]int{}, map[int32]int{}
	for _, reg := range topic.Registrations {
		if len(reg.Replicas) != 3 || len(slices.Compact(slices.Sorted(slices.Values(reg.Replicas)))) != 3 {
			t.Fatalf("replicas %v", reg.Replicas)
		}
		if !slices.Equal(reg.ISR, reg.Replicas) || reg.Leader != reg.Replicas[0] || reg.LeaderEpoch != 0 || reg.PartitionEpoch != 0 {
			t.Fatalf("new partition %+v", reg)
		}
		leaders[reg.Leader]++
		seconds[reg.Replicas[1]]++
	}
	for id := int32(1); id <= 3; id++ {
		if leaders[id] != 2 || seconds[id] != 2 {
			t.Fatalf("leaders %v, second replicas %v: want 2 each", leaders, seconds)
		}
	}
	tc.heartbeat(3, func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
	topic = tc.createTopic("u", 6, 3, nil)
	for _, reg := range topic.Registrations {
		if reg.Leader == 3 || slices.Contains(reg.ISR, 3) || !slices.Contains(reg.Replicas, 3) || len(reg.ISR) != 2 {
			t.Fatalf("partition placed with broker 3 fenced: %+v", reg)
		}
	}
	// RF above the registered brokers, and no broker able to lead, are Kafka's errors.
	if _, err := Place(tc.image(), 1, 4, nil, rand.New(rand.NewPCG(1, 1))); err == nil || err.Error() != "The target replication factor of 4 cannot be reached because only 3 broker(s) are registered." {
		t.Fatalf("RF 4 over 3 brokers: %v", err)
	}
	all := tc.image()
	fenced := withBroker(all, &metadata.BrokerRegistration{ID: 1, Fenced: true})
	fenced = withBroker(fenced, &metadata.BrokerRegistration{ID: 2, InControlledShutdown: true})
	if _, err := PartitionRecords(fenced, metadata.NewTopicID(), 0, [][]int32{{1, 2, 3}}); err == nil ||
		err.Error() != "Unable to replicate the partition 3 time(s): All brokers are currently fenced or in controlled shutdown." {
		t.Fatalf("PartitionRecords with no broker able to lead: %v", err)
	}
}

// TestAlterPartition shrinks and expands an RF 3 ISR through AlterPartition v2 and v3:
// each answer is the new state (the partition epoch up by one, the leader epoch kept); a
// proposal of the current state answers it without a write; the retry of an applied
// proposal is INVALID_UPDATE_VERSION, as Kafka's controller answers it.
func TestAlterPartition(t *testing.T) {
	tc := newTestCluster(t, Options{}, 1, 2, 3)
	tc.createTopic("t", 1, 3, nil)
	reg := tc.reg("t", 0)
	leader := reg.Leader
	follower := reg.Replicas[2]
	shrunk := without(reg.ISR, follower)

	ans := partitionAnswer(t, tc.alter("t", 0, shrunk, nil))
	if ans.ErrorCode != 0 || ans.LeaderID != leader || ans.LeaderEpoch != 0 || ans.PartitionEpoch != 1 || !slices.Equal(ans.ISR, shrunk) || ans.LeaderRecoveryState != 0 {
		t.Fatalf("shrink: %+v (%v)", ans, kerr.ErrorForCode(ans.ErrorCode))
	}
	if now := tc.reg("t", 0); !slices.Equal(now.ISR, shrunk) || now.PartitionEpoch != 1 || now.LeaderEpoch != 0 {
		t.Fatalf("after the shrink: %+v", now)
	}
	offset := tc.image().Offset
	ans = partitionAnswer(t, tc.alter("t", 0, shrunk, nil))
	if ans.ErrorCode != 0 || ans.PartitionEpoch != 1 || tc.image().Offset != offset {
		t.Fatalf("the current state proposed again: %+v, offset %d → %d", ans, offset, tc.image().Offset)
	}
	retry := tc.alter("t", 0, shrunk, func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) { p.PartitionEpoch = 0 })
	if ans := partitionAnswer(t, retry); ans.ErrorCode != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("retry of an applied proposal: %v", kerr.ErrorForCode(ans.ErrorCode))
	}
	// Expansion with v2 (no broker epochs).
	ans = partitionAnswer(t, tc.alter("t", 0, reg.Replicas, func(r *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) {
		r.Version = 2
		p.NewISR, p.NewEpochISR = reg.Replicas, nil
	}))
	if ans.ErrorCode != 0 || ans.PartitionEpoch != 2 || !slices.Equal(ans.ISR, reg.Replicas) {
		t.Fatalf("v2 expansion: %+v (%v)", ans, kerr.ErrorForCode(ans.ErrorCode))
	}
	// v3 with a member's broker epoch −1 skips its check.
	ans = partitionAnswer(t, tc.alter("t", 0, shrunk, func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) {
		p.NewEpochISR[1].BrokerEpoch = -1
	}))
	if ans.ErrorCode != 0 || ans.PartitionEpoch != 3 {
		t.Fatalf("v3 with an epoch −1: %+v (%v)", ans, kerr.ErrorForCode(ans.ErrorCode))
	}
}

// TestAlterPartitionErrors sends each invalid AlterPartition Kafka's controller refuses
// and checks its error and that nothing was written.
func TestAlterPartitionErrors(t *testing.T) {
	tc := newTestCluster(t, Options{}, 1, 2, 3, 4)
	tc.createTopic("t", 1, 3, nil)
	reg := tc.reg("t", 0)
	leader, f1, f2 := reg.Replicas[0], reg.Replicas[1], reg.Replicas[2]
	outside := int32(10) - leader - f1 - f2 // the broker with no replica
	// Move to leader epoch 2, partition epoch 2, ISR = leader and f1.
	tc.setPartition("t", 0, f1, []int32{f1, leader})
	tc.setPartition("t", 0, leader, []int32{leader, f1})

	type edit = func(*kmsg.AlterPartitionRequest, *kmsg.AlterPartitionRequestTopicPartition)
	for _, c := range []struct {
		name string
		isr  []int32
		edit edit
		want *kerr.Error
		top  bool // a request-level error
	}{
		{"stale broker epoch", []int32{leader, f1}, func(r *kmsg.AlterPartitionRequest, _ *kmsg.AlterPartitionRequestTopicPartition) { r.BrokerEpoch-- }, kerr.StaleBrokerEpoch, true},
		{"unregistered requester", []int32{leader, f1}, func(r *kmsg.AlterPartitionRequest, _ *kmsg.AlterPartitionRequestTopicPartition) { r.BrokerID = 99 }, kerr.StaleBrokerEpoch, true},
		{"unknown topic ID", []int32{leader, f1}, func(r *kmsg.AlterPartitionRequest, _ *kmsg.AlterPartitionRequestTopicPartition) {
			r.Topics[0].TopicID = metadata.NewTopicID()
		}, kerr.UnknownTopicID, false},
		{"unknown topic name (v1)", []int32{leader, f1}, func(r *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) {
			r.Version, r.Topics[0].Topic = 1, "nope"
			p.NewISR, p.NewEpochISR = []int32{leader, f1}, nil
		}, kerr.UnknownTopicOrPartition, false},
		{"unknown partition", []int32{leader, f1}, func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) { p.Partition = 5 }, kerr.UnknownTopicOrPartition, false},
		{"leader epoch above the controller's", []int32{leader, f1}, func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) { p.LeaderEpoch++ }, kerr.NotController, false},
		{"partition epoch above the controller's", []int32{leader, f1}, func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) { p.PartitionEpoch++ }, kerr.NotController, false},
		{"stale leader epoch", []int32{leader, f1}, func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) { p.LeaderEpoch-- }, kerr.FencedLeaderEpoch, false},
		{"not the leader", []int32{leader, f1}, func(r *kmsg.AlterPartitionRequest, _ *kmsg.AlterPartitionRequestTopicPartition) {
			r.BrokerID, r.BrokerEpoch = f1, tc.epochs[f1]
		}, kerr.InvalidRequest, false},
		{"stale partition epoch", []int32{leader, f1}, func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) { p.PartitionEpoch-- }, kerr.InvalidUpdateVersion, false},
		{"leader not in the ISR", []int32{f1, f2}, nil, kerr.InvalidRequest, false},
		{"empty ISR", []int32{}, nil, kerr.InvalidRequest, false},
		{"ISR member not a replica", []int32{leader, outside}, nil, kerr.InvalidRequest, false},
		{"ISR member twice", []int32{leader, f1, f1}, nil, kerr.InvalidRequest, false},
		{"RECOVERING with more than the leader", []int32{leader, f1}, func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) {
			p.LeaderRecoveryState = metadata.LeaderRecovering
		}, kerr.InvalidRequest, false},
		{"RECOVERED to RECOVERING", []int32{leader}, func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) {
			p.LeaderRecoveryState = metadata.LeaderRecovering
		}, kerr.InvalidRequest, false},
		{"ISR member's broker epoch mismatch", []int32{leader, f1, f2}, func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) {
			p.NewEpochISR[2].BrokerEpoch++
		}, kerr.IneligibleReplica, false},
		{"ISR member not a replica (v1, by topic name)", nil, func(r *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) {
			r.Version, r.Topics[0].Topic = 1, "t"
			p.NewISR, p.NewEpochISR = []int32{leader, f1, outside}, nil
		}, kerr.InvalidRequest, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := tc.image().Offset
			resp := tc.alter("t", 0, c.isr, c.edit)
			var got int16
			if c.top {
				got = resp.ErrorCode
			} else {
				got = partitionAnswer(t, resp).ErrorCode
			}
			if got != c.want.Code {
				t.Fatalf("got %v, want %v", kerr.ErrorForCode(got), c.want)
			}
			if tc.image().Offset != before {
				t.Fatal("a refused AlterPartition wrote the metadata log")
			}
		})
	}

	// Ineligible ISR members: fenced, in controlled shutdown, not registered.
	tc.heartbeat(f2, func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
	if ans := partitionAnswer(t, tc.alter("t", 0, []int32{leader, f1, f2}, nil)); ans.ErrorCode != kerr.IneligibleReplica.Code {
		t.Fatalf("fenced ISR member: %v", kerr.ErrorForCode(ans.ErrorCode))
	}
	// v1 (by name, no longer served) answers OPERATION_NOT_ATTEMPTED for it.
	v1 := tc.alter("t", 0, nil, func(r *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) {
		r.Version, r.Topics[0].Topic = 1, "t"
		p.NewISR, p.NewEpochISR = []int32{leader, f1, f2}, nil
	})
	if ans := partitionAnswer(t, v1); ans.ErrorCode != kerr.OperationNotAttempted.Code {
		t.Fatalf("v1 with a fenced ISR member: %v", kerr.ErrorForCode(ans.ErrorCode))
	}
	tc.register(f2, "rack") // registered again: fenced, another epoch
	tc.heartbeat(f2, nil)
	tc.heartbeat(f2, func(r *kmsg.BrokerHeartbeatRequest) { r.WantShutdown = true }) // leads nothing: fenced at once
	if ans := partitionAnswer(t, tc.alter("t", 0, []int32{leader, f1, f2}, nil)); ans.ErrorCode != kerr.IneligibleReplica.Code {
		t.Fatalf("ISR member that shut down: %v", kerr.ErrorForCode(ans.ErrorCode))
	}
	b := tc.image().Brokers[f2]
	if _, err := tc.q.Apply(tc.ctx, metadata.UnregisterBrokerRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch}); err != nil {
		t.Fatal(err)
	}
	if ans := partitionAnswer(t, tc.alter("t", 0, []int32{leader, f1, f2}, nil)); ans.ErrorCode != kerr.IneligibleReplica.Code {
		t.Fatalf("unregistered ISR member: %v", kerr.ErrorForCode(ans.ErrorCode))
	}
	// A controller that is not active answers NOT_CONTROLLER.
	idle := New(tc.q, Options{NodeID: 2})
	if resp := idle.AlterPartition(tc.ctx, kmsg.NewPtrAlterPartitionRequest()); resp.ErrorCode != kerr.NotController.Code {
		t.Fatalf("inactive controller: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestAlterPartitionIneligibleInControlledShutdown proposes an ISR member that is in
// controlled shutdown.
func TestAlterPartitionIneligibleInControlledShutdown(t *testing.T) {
	tc := newTestCluster(t, Options{}, 1, 2, 3)
	tc.createTopic("t", 3, 3, nil)
	// Broker 3 leads a partition, so WantShutdown puts it in controlled shutdown.
	resp := tc.heartbeat(3, func(r *kmsg.BrokerHeartbeatRequest) { r.WantShutdown = true })
	if resp.ShouldShutdown || !tc.image().Brokers[3].InControlledShutdown {
		t.Fatalf("broker 3 not in controlled shutdown: %+v", resp)
	}
	for p := range int32(3) {
		reg := tc.reg("t", p)
		if slices.Contains(reg.ISR, 3) || reg.Leader == 3 {
			t.Fatalf("partition %d after broker 3's shutdown began: %+v", p, reg)
		}
		if ans := partitionAnswer(t, tc.alter("t", p, append(slices.Clone(reg.ISR), 3), nil)); ans.ErrorCode != kerr.IneligibleReplica.Code {
			t.Fatalf("partition %d: ISR member in controlled shutdown: %v", p, kerr.ErrorForCode(ans.ErrorCode))
		}
	}
}

// TestFenceAndUnfenceRF3 fences brokers of RF 3 partitions one by one: each leaves every
// ISR but the last member's, its leaderships move to the next ISR member in replica
// order; unfenced again it rejoins no ISR until the leader's AlterPartition adds it, and
// the last ISR member coming back leads again.
func TestFenceAndUnfenceRF3(t *testing.T) {
	tc := newTestCluster(t, Options{}, 1, 2, 3)
	tc.createTopic("t", 3, 3, nil)
	before := map[int32]*metadata.PartitionRegistration{}
	for p := range int32(3) {
		before[p] = tc.reg("t", p)
	}
	// Broker 1's session expires.
	tc.c.mu.Lock()
	tc.c.sessions[1].lastContact = time.Now().Add(-2 * time.Hour)
	tc.c.mu.Unlock()
	tc.c.step(tc.ctx)
	if !tc.image().Brokers[1].Fenced {
		t.Fatal("broker 1 not fenced after its session expired")
	}
	for p := range int32(3) {
		old, reg := before[p], tc.reg("t", p)
		wantISR := without(old.ISR, 1)
		if !slices.Equal(reg.ISR, wantISR) {
			t.Fatalf("partition %d: ISR %v, want %v", p, reg.ISR, wantISR)
		}
		if old.Leader == 1 {
			if reg.Leader != wantISR[0] || reg.LeaderEpoch != old.LeaderEpoch+1 {
				t.Fatalf("partition %d led by the fenced broker: %+v", p, reg)
			}
		} else if reg.Leader != old.Leader || reg.LeaderEpoch != old.LeaderEpoch || reg.PartitionEpoch != old.PartitionEpoch+1 {
			t.Fatalf("partition %d following on the fenced broker: %+v (was %+v)", p, reg, old)
		}
	}
	// Unfenced again: it rejoins no ISR by itself.
	tc.heartbeat(1, nil)
	if tc.image().Brokers[1].Fenced {
		t.Fatal("broker 1 still fenced")
	}
	for p := range int32(3) {
		if slices.Contains(tc.reg("t", p).ISR, 1) {
			t.Fatalf("partition %d: the unfenced broker rejoined the ISR without AlterPartition", p)
		}
	}
	// The leader adds it back (with its broker epoch).
	for p := range int32(3) {
		reg := tc.reg("t", p)
		if ans := partitionAnswer(t, tc.alter("t", p, append(slices.Clone(reg.ISR), 1), nil)); ans.ErrorCode != 0 {
			t.Fatalf("partition %d: adding broker 1 back: %v", p, kerr.ErrorForCode(ans.ErrorCode))
		}
	}
	// Fence every broker: each partition keeps its last ISR member and has no leader.
	for _, id := range []int32{1, 2, 3} {
		tc.heartbeat(id, func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
	}
	last := map[int32]int32{}
	for p := range int32(3) {
		reg := tc.reg("t", p)
		if reg.Leader != metadata.NoLeader || len(reg.ISR) != 1 {
			t.Fatalf("partition %d with every broker fenced: %+v", p, reg)
		}
		last[p] = reg.ISR[0]
	}
	// A replica outside the ISR coming back does not lead (unclean election is off)...
	tc.heartbeat(2, nil)
	for p := range int32(3) {
		reg := tc.reg("t", p)
		if want := map[bool]int32{true: 2, false: metadata.NoLeader}[last[p] == 2]; reg.Leader != want {
			t.Fatalf("partition %d (last ISR member %d) after broker 2 came back: leader %d, want %d", p, last[p], reg.Leader, want)
		}
	}
	// ...the last ISR member does.
	tc.heartbeat(1, nil)
	tc.heartbeat(3, nil)
	for p := range int32(3) {
		if reg := tc.reg("t", p); reg.Leader != last[p] || !slices.Equal(reg.ISR, []int32{last[p]}) {
			t.Fatalf("partition %d after every broker came back: %+v (want led by %d)", p, reg, last[p])
		}
	}
}

// TestControlledShutdownRF3 shuts a broker down as SIGTERM does: its leaderships move to
// other ISR members and it leaves the ISRs at once (no partition without a leader), it may
// stop only once every active broker has applied that, and it is fenced then.
func TestControlledShutdownRF3(t *testing.T) {
	tc := newTestCluster(t, Options{}, 1, 2, 3)
	tc.createTopic("t", 6, 3, nil)
	want := func(r *kmsg.BrokerHeartbeatRequest) { r.WantShutdown = true }
	resp := tc.heartbeat(2, want)
	if resp.ShouldShutdown || resp.IsFenced || !tc.image().Brokers[2].InControlledShutdown {
		t.Fatalf("first WantShutdown heartbeat: %+v", resp)
	}
	for p := range int32(6) {
		reg := tc.reg("t", p)
		if reg.Leader == metadata.NoLeader || reg.Leader == 2 || slices.Contains(reg.ISR, 2) || len(reg.ISR) != 2 {
			t.Fatalf("partition %d during broker 2's controlled shutdown: %+v", p, reg)
		}
	}
	// The other brokers have not applied the shutdown's batch yet.
	stale := func(r *kmsg.BrokerHeartbeatRequest) { r.CurrentMetadataOffset = tc.epochs[r.BrokerID] }
	tc.heartbeat(1, stale)
	tc.heartbeat(3, stale)
	if resp := tc.heartbeat(2, want); resp.ShouldShutdown {
		t.Fatal("ShouldShutdown before the active brokers applied the controlled shutdown")
	}
	tc.heartbeat(1, nil)
	if resp := tc.heartbeat(2, want); resp.ShouldShutdown {
		t.Fatal("ShouldShutdown before broker 3 applied the controlled shutdown")
	}
	tc.heartbeat(3, nil)
	resp = tc.heartbeat(2, want)
	if !resp.ShouldShutdown || !resp.IsFenced || !tc.image().Brokers[2].Fenced {
		t.Fatalf("once every active broker applied the shutdown: %+v", resp)
	}
	// It comes back: registered and unfenced, it rejoins no ISR and leads nothing until
	// AlterPartition adds it and a preferred election moves leadership back.
	tc.register(2, "rack2")
	tc.heartbeat(2, nil)
	for p := range int32(6) {
		if reg := tc.reg("t", p); reg.Leader == 2 || slices.Contains(reg.ISR, 2) {
			t.Fatalf("partition %d after broker 2 restarted: %+v", p, reg)
		}
	}
}

// TestUncleanLeaderElection takes every ISR member of an RF 3 partition away while
// another replica lives: with unclean.leader.election.enable off (the default) the
// partition stays without a leader; turned on for the topic (or by the broker default,
// static or dynamic) the live replica leads with ISR = it and RECOVERING, and its
// AlterPartition clears RECOVERING.
func TestUncleanLeaderElection(t *testing.T) {
	for _, how := range []string{"topic config", "static default", "dynamic cluster default", "dynamic node config"} {
		t.Run(how, func(t *testing.T) {
			tc := newTestCluster(t, Options{UncleanLeaderElection: how == "static default"}, 1, 2, 3)
			tc.createTopic("t", 1, 3, nil)
			reg := tc.reg("t", 0)
			l, f1, f2 := reg.Replicas[0], reg.Replicas[1], reg.Replicas[2]
			// f2 drops out of the ISR (lagging), then the other two are fenced.
			partitionAnswer(t, tc.alter("t", 0, []int32{l, f1}, nil))
			if how != "static default" {
				tc.heartbeat(f1, func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
				tc.heartbeat(l, func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
				if reg := tc.reg("t", 0); reg.Leader != metadata.NoLeader || !slices.Equal(reg.ISR, []int32{l}) {
					t.Fatalf("without unclean election: %+v", reg)
				}
				tc.c.step(tc.ctx)
				if reg := tc.reg("t", 0); reg.Leader != metadata.NoLeader {
					t.Fatalf("elected without unclean election: %+v", reg)
				}
				on := "true"
				var rec metadata.ConfigRecord
				switch how {
				case "topic config":
					rec = metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "t", Name: uncleanElectionKey, Value: &on}
				case "dynamic cluster default":
					rec = metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, Name: uncleanElectionKey, Value: &on}
				case "dynamic node config":
					rec = metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, ResourceName: "1", Name: uncleanElectionKey, Value: &on}
				}
				if _, err := tc.q.Apply(tc.ctx, rec); err != nil {
					t.Fatal(err)
				}
				tc.c.step(tc.ctx) // the controller elects leaderless partitions of topics that allow it
			} else {
				tc.heartbeat(f1, func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
				tc.heartbeat(l, func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true }) // elected while fencing
			}
			reg = tc.reg("t", 0)
			if reg.Leader != f2 || !slices.Equal(reg.ISR, []int32{f2}) || reg.LeaderRecoveryState != metadata.LeaderRecovering {
				t.Fatalf("after the unclean election: %+v", reg)
			}
			// While recovering the leader may not grow the ISR; it clears RECOVERING first.
			tc.heartbeat(f1, nil)
			recovering := func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) {
				p.LeaderRecoveryState = metadata.LeaderRecovering
			}
			if ans := partitionAnswer(t, tc.alter("t", 0, []int32{f2, f1}, recovering)); ans.ErrorCode != kerr.InvalidRequest.Code {
				t.Fatalf("ISR growth while RECOVERING: %v", kerr.ErrorForCode(ans.ErrorCode))
			}
			recovered := func(_ *kmsg.AlterPartitionRequest, p *kmsg.AlterPartitionRequestTopicPartition) {
				p.LeaderRecoveryState = metadata.LeaderRecovered
			}
			ans := partitionAnswer(t, tc.alter("t", 0, []int32{f2}, recovered))
			if ans.ErrorCode != 0 || ans.LeaderRecoveryState != metadata.LeaderRecovered {
				t.Fatalf("clearing RECOVERING: %+v (%v)", ans, kerr.ErrorForCode(ans.ErrorCode))
			}
			if ans := partitionAnswer(t, tc.alter("t", 0, []int32{f2, f1}, nil)); ans.ErrorCode != 0 || !slices.Equal(ans.ISR, []int32{f2, f1}) {
				t.Fatalf("ISR growth once recovered: %+v (%v)", ans, kerr.ErrorForCode(ans.ErrorCode))
			}
		})
	}
}

// electReq is an ElectLeaders v2 request for partitions of topic t (nil: all).
func electReq(electionType int8, t string, partitions ...int32) *kmsg.ElectLeadersRequest {
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType, req.TimeoutMillis = 2, electionType, 10000
	if t != "" {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = t, partitions
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// electResults maps each partition answer of resp to its error.
func electResults(t *testing.T, resp *kmsg.ElectLeadersResponse) map[string]int16 {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("ElectLeaders: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[fmt.Sprintf("%s-%d", rt.Topic, rp.Partition)] = rp.ErrorCode
		}
	}
	return out
}

// TestElectLeaders runs both election types of kafka-leader-election on RF 3 partitions.
func TestElectLeaders(t *testing.T) {
	tc := newTestCluster(t, Options{}, 1, 2, 3)
	tc.createTopic("t", 3, 3, nil)
	pref := func(p int32) int32 { return tc.reg("t", p).Replicas[0] }
	// Partition 0 led by its second replica, preferred in the ISR: elected.
	// Partition 1 led by its second replica, preferred out of the ISR: not available.
	// Partition 2 led by its preferred replica: not needed.
	r0, r1 := tc.reg("t", 0), tc.reg("t", 1)
	tc.setPartition("t", 0, r0.Replicas[1], nil)
	tc.setPartition("t", 1, r1.Replicas[1], []int32{r1.Replicas[1], r1.Replicas[2]})
	got := electResults(t, tc.c.ElectLeaders(tc.ctx, electReq(ElectionPreferred, "t", 0, 1, 2, 7)))
	want := map[string]int16{"t-0": 0, "t-1": kerr.PreferredLeaderNotAvailable.Code, "t-2": kerr.ElectionNotNeeded.Code, "t-7": kerr.UnknownTopicOrPartition.Code}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("PREFERRED: %v, want %v", got, want)
	}
	if reg := tc.reg("t", 0); reg.Leader != pref(0) || reg.LeaderEpoch != r0.LeaderEpoch+2 {
		t.Fatalf("partition 0 after the preferred election: %+v", reg)
	}
	// Unknown topic; all partitions (ELECTION_NOT_NEEDED left out).
	got = electResults(t, tc.c.ElectLeaders(tc.ctx, electReq(ElectionPreferred, "nope", 0)))
	if got["nope-0"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", got)
	}
	got = electResults(t, tc.c.ElectLeaders(tc.ctx, electReq(ElectionPreferred, "")))
	if fmt.Sprint(got) != fmt.Sprint(map[string]int16{"t-1": kerr.PreferredLeaderNotAvailable.Code}) {
		t.Fatalf("PREFERRED over all partitions: %v", got)
	}
	// The preferred replica back in the ISR (AlterPartition) is electable; a fenced one not.
	r1 = tc.reg("t", 1)
	partitionAnswer(t, tc.alter("t", 1, append(slices.Clone(r1.ISR), r1.Replicas[0]), nil))
	tc.heartbeat(r1.Replicas[0], func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
	if got := electResults(t, tc.c.ElectLeaders(tc.ctx, electReq(ElectionPreferred, "t", 1))); got["t-1"] != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("fenced preferred replica: %v", got)
	}
	tc.heartbeat(r1.Replicas[0], nil)
	partitionAnswer(t, tc.alter("t", 1, r1.Replicas, nil))
	if got := electResults(t, tc.c.ElectLeaders(tc.ctx, electReq(ElectionPreferred, "t", 1))); got["t-1"] != 0 || tc.reg("t", 1).Leader != r1.Replicas[0] {
		t.Fatalf("preferred replica back in the ISR: %v, %+v", got, tc.reg("t", 1))
	}
	// v0 is PREFERRED.
	v0 := electReq(1, "t", 2)
	v0.Version = 0
	if got := electResults(t, tc.c.ElectLeaders(tc.ctx, v0)); got["t-2"] != kerr.ElectionNotNeeded.Code {
		t.Fatalf("v0: %v", got)
	}

	// UNCLEAN: not needed with a leader; a leaderless partition whose ISR members are
	// fenced gets the first live replica although the topic does not allow unclean
	// elections by itself; none live: ELIGIBLE_LEADERS_NOT_AVAILABLE.
	if got := electResults(t, tc.c.ElectLeaders(tc.ctx, electReq(ElectionUnclean, "t", 0))); got["t-0"] != kerr.ElectionNotNeeded.Code {
		t.Fatalf("UNCLEAN with a leader: %v", got)
	}
	r2 := tc.reg("t", 2)
	l, f1, f2 := r2.Replicas[0], r2.Replicas[1], r2.Replicas[2]
	partitionAnswer(t, tc.alter("t", 2, []int32{l}, nil))
	tc.heartbeat(l, func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
	tc.heartbeat(f1, func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
	tc.heartbeat(f2, func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
	if got := electResults(t, tc.c.ElectLeaders(tc.ctx, electReq(ElectionUnclean, "t", 2))); got["t-2"] != kerr.EligibleLeadersNotAvailable.Code {
		t.Fatalf("UNCLEAN with no live replica: %v", got)
	}
	tc.heartbeat(f2, nil)
	if reg := tc.reg("t", 2); reg.Leader != metadata.NoLeader {
		t.Fatalf("partition 2 elected a replica outside the ISR by itself: %+v", reg)
	}
	if got := electResults(t, tc.c.ElectLeaders(tc.ctx, electReq(ElectionUnclean, "t", 2))); got["t-2"] != 0 {
		t.Fatalf("UNCLEAN with a live replica: %v", got)
	}
	if reg := tc.reg("t", 2); reg.Leader != f2 || !slices.Equal(reg.ISR, []int32{f2}) || reg.LeaderRecoveryState != metadata.LeaderRecovering {
		t.Fatalf("partition 2 after the unclean election: %+v", reg)
	}

	// Request-level errors.
	bad := electReq(5, "t", 0)
	if resp := tc.c.ElectLeaders(tc.ctx, bad); resp.ErrorCode != kerr.InvalidRequest.Code || resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("unknown election type: %+v", resp)
	}
	idle := New(tc.q, Options{NodeID: 2})
	if resp := idle.ElectLeaders(tc.ctx, electReq(0, "t", 0)); resp.ErrorCode != kerr.NotController.Code || resp.Topics[0].Partitions[0].ErrorCode != kerr.NotController.Code {
		t.Fatalf("inactive controller: %+v", resp)
	}
}

// TestAutoLeaderRebalance checks auto.leader.rebalance.enable: a partition not led by its
// preferred replica is rebalanced one check interval after it is seen, once the preferred
// replica is in the ISR and may lead; with the option off nothing moves.
func TestAutoLeaderRebalance(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		t.Run(fmt.Sprint("enabled=", enabled), func(t *testing.T) {
			tc := newTestCluster(t, Options{AutoLeaderRebalance: enabled, LeaderImbalanceCheckInterval: time.Minute}, 1, 2, 3)
			tc.createTopic("t", 3, 3, nil)
			// Broker 1 restarts: fenced, its leaderships move, it comes back and its
			// partitions' leaders add it to the ISRs.
			tc.heartbeat(1, func(r *kmsg.BrokerHeartbeatRequest) { r.WantFence = true })
			tc.heartbeat(1, nil)
			var moved []int32
			for p := range int32(3) {
				reg := tc.reg("t", p)
				if !slices.Contains(reg.ISR, 1) {
					partitionAnswer(t, tc.alter("t", p, append(slices.Clone(reg.ISR), 1), nil))
				}
				if reg.Replicas[0] == 1 {
					moved = append(moved, p)
				}
			}
			if len(moved) != 1 {
				t.Fatalf("broker 1 is the preferred replica of %d partitions, want 1", len(moved))
			}
			now := time.Now()
			tc.c.writeMu.Lock()
			tc.c.maybeRebalance(tc.ctx, now) // schedules
			tc.c.maybeRebalance(tc.ctx, now.Add(30*time.Second))
			tc.c.writeMu.Unlock()
			if reg := tc.reg("t", moved[0]); reg.Leader == 1 {
				t.Fatal("rebalanced before the check interval passed")
			}
			tc.c.writeMu.Lock()
			tc.c.maybeRebalance(tc.ctx, now.Add(61*time.Second))
			tc.c.writeMu.Unlock()
			for p := range int32(3) {
				reg := tc.reg("t", p)
				if balanced := reg.HasPreferredLeader(); balanced != (enabled || p != moved[0]) {
					t.Fatalf("partition %d after the check interval: %+v", p, reg)
				}
			}
			if enabled && !tc.c.rebalanceAt.IsZero() {
				t.Fatal("another rebalance scheduled with every partition balanced")
			}
		})
	}
}

// TestInProcessHeartbeatsKeepTheSession: heartbeats that reach the controller in-process
// (a combined node's own broker; each with a context cancelled once it is answered) are
// not taken for a connection that closed: twice the heartbeat interval without one
// leaves the broker unfenced, its session timeout (an hour here) alone applying.
func TestInProcessHeartbeatsKeepTheSession(t *testing.T) {
	tc := newTestCluster(t, Options{HeartbeatInterval: 20 * time.Millisecond}, 2)
	ctx, cancel := context.WithTimeout(tc.ctx, time.Minute)
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset = 2, tc.epochs[2], int64(tc.image().Offset)
	if resp := tc.c.Heartbeat(ctx, req); resp.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	cancel()                           // as the broker's lifecycle does after each heartbeat
	time.Sleep(100 * time.Millisecond) // more than twice the interval
	tc.c.step(tc.ctx)
	if tc.image().Brokers[2].Fenced {
		t.Fatal("broker 2 fenced although its in-process heartbeats never had a connection to lose")
	}
}
