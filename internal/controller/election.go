package controller

import (
	"slices"

	"github.com/kmirror/kmirror/internal/metadata"
)

// canLead reports whether broker id may become a leader in im: registered, unfenced and
// not in controlled shutdown (Kafka's PartitionChangeBuilder isAcceptableLeader).
func canLead(im *metadata.Image, id int32) bool {
	b, ok := im.Brokers[id]
	return ok && b.Usable()
}

// change builds the PartitionChangeRecord that moves a partition to the target ISR and
// elects its leader as Kafka's PartitionChangeBuilder does: the current leader stays while
// it is in the ISR and may lead; otherwise the first replica in preferred order that is
// in the ISR and may lead; otherwise, with unclean election enabled, the first replica
// that may lead, which becomes the ISR alone with the leader recovery state RECOVERING;
// otherwise no leader. A leader change raises the leader epoch by one. It returns nil when
// nothing changes.
func change(im *metadata.Image, id metadata.TopicID, p int32, reg *metadata.PartitionRegistration, isr []int32, unclean bool) *metadata.PartitionChangeRecord {
	leader := metadata.NoLeader
	var recovering bool
	switch {
	case reg.Leader != metadata.NoLeader && slices.Contains(isr, reg.Leader) && canLead(im, reg.Leader):
		leader = reg.Leader
	default:
		for _, r := range reg.Replicas {
			if slices.Contains(isr, r) && canLead(im, r) {
				leader = r
				break
			}
		}
		if leader == metadata.NoLeader && unclean {
			for _, r := range reg.Replicas {
				if canLead(im, r) {
					leader, isr, recovering = r, []int32{r}, true
					break
				}
			}
		}
	}
	if leader == reg.Leader && slices.Equal(isr, reg.ISR) {
		return nil
	}
	rec := &metadata.PartitionChangeRecord{TopicID: id, Partition: p, LeaderEpoch: reg.LeaderEpoch}
	if !slices.Equal(isr, reg.ISR) {
		rec.ISR = slices.Clone(isr)
	}
	if leader != reg.Leader {
		rec.Leader = &leader
		rec.LeaderEpoch++
	}
	if recovering {
		st := metadata.LeaderRecovering
		rec.LeaderRecoveryState = &st
	}
	return rec
}

// without returns isr minus broker id, or isr itself when id is its only member: the ISR
// never becomes empty, so a partition whose last in-sync replica left keeps it there with
// no leader until it comes back (Kafka's fencing of a broker in the ISR).
func without(isr []int32, id int32) []int32 {
	if len(isr) == 1 || !slices.Contains(isr, id) {
		return isr
	}
	return slices.DeleteFunc(slices.Clone(isr), func(r int32) bool { return r == id })
}

// leaving returns the changes for a broker that was fenced or entered controlled
// shutdown (already so in im): it leaves every ISR it may leave, and the partitions it led
// get a new leader or none (Kafka's ReplicationControlManager.handleBrokerFenced and
// handleBrokerInControlledShutdown).
func leaving(im *metadata.Image, id int32, unclean func(*metadata.Topic) bool) []metadata.Record {
	var out []metadata.Record
	eachPartition(im, func(t *metadata.Topic, p int32, reg *metadata.PartitionRegistration) {
		if !slices.Contains(reg.ISR, id) && reg.Leader != id {
			return
		}
		if rec := change(im, t.ID, p, reg, without(reg.ISR, id), unclean(t)); rec != nil {
			out = append(out, *rec)
		}
	})
	return out
}

// electOffline returns the changes that give a leader to every partition without one
// that has a replica able to lead in im (a broker unfenced, a controller that became
// active): Kafka's ReplicationControlManager.handleBrokerUnfenced and its election of
// offline partitions.
func electOffline(im *metadata.Image, unclean func(*metadata.Topic) bool) []metadata.Record {
	var out []metadata.Record
	eachPartition(im, func(t *metadata.Topic, p int32, reg *metadata.PartitionRegistration) {
		if reg.Leader != metadata.NoLeader {
			return
		}
		if rec := change(im, t.ID, p, reg, reg.ISR, unclean(t)); rec != nil {
			out = append(out, *rec)
		}
	})
	return out
}

// eachPartition calls fn for every assigned partition of im, topics in name order.
func eachPartition(im *metadata.Image, fn func(t *metadata.Topic, p int32, reg *metadata.PartitionRegistration)) {
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		for p, reg := range t.Registrations {
			if reg.Assigned() {
				fn(t, int32(p), reg)
			}
		}
	}
}
