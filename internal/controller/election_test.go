package controller

import (
	"slices"
	"testing"

	"github.com/kmirror/kmirror/internal/metadata"
)

// build runs a change of reg in im with the target ISR isr (nil: unchanged) and election.
func build(im *metadata.Image, reg *metadata.PartitionRegistration, isr []int32, e election) *metadata.PartitionChangeRecord {
	c := newChange(im, metadata.TopicID{1}, 0, reg)
	if isr != nil {
		c.isr = isr
	}
	c.election = e
	return c.build()
}

// TestChangeElectsAsKafka checks the elections of PartitionChangeBuilder: a valid leader
// stays, else the first ISR member in replica order that may lead, else (unclean) the
// first replica that may lead with ISR = it and RECOVERING, else no leader; a leader
// change raises the leader epoch by one, an ISR change alone does not.
func TestChangeElectsAsKafka(t *testing.T) {
	im := image(map[int32]string{1: "", 2: "", 3: ""}, 3)
	reg := &metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4}
	if rec := build(im, reg, nil, electOnline); rec != nil {
		t.Fatalf("a valid leader was changed: %+v", rec)
	}
	// An ISR shrink alone keeps the leader epoch (Kafka 3.6+).
	rec := build(im, reg, []int32{1, 2}, electOnline)
	if rec == nil || rec.Leader != nil || rec.LeaderEpoch != 4 || !slices.Equal(rec.ISR, []int32{1, 2}) {
		t.Fatalf("ISR shrink: %+v", rec)
	}
	// Leader 1 leaves the ISR: 2 is the first ISR member in preferred order that may lead.
	rec = build(im, reg, []int32{2, 3}, electOnline)
	if rec == nil || *rec.Leader != 2 || rec.LeaderEpoch != 5 || !slices.Equal(rec.ISR, []int32{2, 3}) {
		t.Fatalf("after the leader left the ISR: %+v", rec)
	}
	// Only the fenced broker 3 is in the ISR: no leader, unless unclean election is allowed.
	rec = build(im, reg, []int32{3}, electOnline)
	if rec == nil || *rec.Leader != metadata.NoLeader || rec.LeaderEpoch != 5 || rec.LeaderRecoveryState != nil {
		t.Fatalf("no live ISR member: %+v", rec)
	}
	off := &metadata.PartitionRegistration{Replicas: []int32{3, 2, 1}, ISR: []int32{3}, Leader: metadata.NoLeader, LeaderEpoch: 4}
	if rec := build(im, off, nil, electOnline); rec != nil {
		t.Fatalf("an offline partition without a live ISR member changed without unclean election: %+v", rec)
	}
	rec = build(im, off, nil, electUnclean)
	if rec == nil || *rec.Leader != 2 || !slices.Equal(rec.ISR, []int32{2}) || *rec.LeaderRecoveryState != metadata.LeaderRecovering || rec.LeaderEpoch != 5 {
		t.Fatalf("unclean election: %+v", rec)
	}
	// Unclean election prefers a clean one.
	rec = build(im, &metadata.PartitionRegistration{Replicas: []int32{3, 2, 1}, ISR: []int32{3, 1}, Leader: metadata.NoLeader}, nil, electUnclean)
	if rec == nil || *rec.Leader != 1 || rec.ISR != nil || rec.LeaderRecoveryState != nil {
		t.Fatalf("unclean election with a live ISR member: %+v", rec)
	}
	// An ELR left in a registration is cleared (KIP-966 disabled); the last-known ELR stays.
	elr := &metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, ELR: []int32{2}, LastKnownELR: []int32{3}, Leader: 1}
	rec = build(im, elr, nil, electOnline)
	if rec == nil || rec.ELR == nil || len(rec.ELR) != 0 || rec.LastKnownELR != nil || rec.Leader != nil {
		t.Fatalf("ELR cleanup: %+v", rec)
	}
}

// TestPreferredElection checks Kafka's electPreferredLeader: the preferred replica when it
// is in the ISR and may lead, else the current leader, else another ISR member.
func TestPreferredElection(t *testing.T) {
	im := image(map[int32]string{1: "", 2: "", 3: ""})
	reg := &metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 7}
	if rec := build(im, reg, nil, electPreferred); rec == nil || *rec.Leader != 1 || rec.LeaderEpoch != 8 {
		t.Fatalf("preferred replica in the ISR: %+v", rec)
	}
	out := &metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}, Leader: 2, LeaderEpoch: 7}
	if rec := build(im, out, nil, electPreferred); rec != nil {
		t.Fatalf("preferred replica outside the ISR: %+v", rec)
	}
	im.Brokers[1].Fenced = true
	if rec := build(im, reg, nil, electPreferred); rec != nil {
		t.Fatalf("fenced preferred replica: %+v", rec)
	}
	none := &metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}, Leader: metadata.NoLeader, LeaderEpoch: 7}
	if rec := build(im, none, nil, electPreferred); rec == nil || *rec.Leader != 3 {
		t.Fatalf("leaderless partition with the preferred replica fenced: %+v", rec)
	}
}

func TestLeavingKeepsTheLastISRMember(t *testing.T) {
	im := image(map[int32]string{1: "", 2: ""}, 2)
	id := metadata.NewTopicID()
	im.Topics["t"] = &metadata.Topic{Name: "t", ID: id, Partitions: 3, Registrations: []*metadata.PartitionRegistration{
		{Replicas: []int32{2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 7},
		{Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 3},
		{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 9},
	}}
	recs := leaving(im, 2, nil)
	if len(recs) != 3 {
		t.Fatalf("records %+v", recs)
	}
	r0, r1, r2 := recs[0].(metadata.PartitionChangeRecord), recs[1].(metadata.PartitionChangeRecord), recs[2].(metadata.PartitionChangeRecord)
	if *r0.Leader != metadata.NoLeader || r0.ISR != nil || r0.LeaderEpoch != 8 {
		t.Fatalf("RF 1 partition of a fenced broker: %+v (want no leader, ISR kept)", r0)
	}
	if *r1.Leader != 1 || !slices.Equal(r1.ISR, []int32{1}) || r1.LeaderEpoch != 4 {
		t.Fatalf("RF 2 partition led by the fenced broker: %+v", r1)
	}
	if r2.Leader != nil || !slices.Equal(r2.ISR, []int32{1}) || r2.LeaderEpoch != 9 {
		t.Fatalf("RF 2 partition following on the fenced broker: %+v (want ISR shrink, same epoch)", r2)
	}
}
