package controller

// AlterPartition v2–3 on the active controller (Kafka's
// ReplicationControlManager.alterPartition and validateAlterPartitionData): a partition
// leader proposes a new ISR (and, after an unclean election, that it recovered).

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
)

// AlterPartition applies the ISR changes a partition leader proposes, each checked as
// Kafka's controller checks it, in this order, against the partition's registration:
//
//   - UNKNOWN_TOPIC_ID (v2+; UNKNOWN_TOPIC_OR_PARTITION by name before): no such topic;
//     UNKNOWN_TOPIC_OR_PARTITION: no such partition;
//   - NOT_CONTROLLER: the request's leader epoch or partition epoch is above the
//     partition's (this controller is behind: the leader should find the new one);
//   - FENCED_LEADER_EPOCH: the leader epoch is below the partition's;
//   - INVALID_REQUEST: the requesting broker is not the leader (Kafka's controller answers
//     this, not NOT_LEADER_OR_FOLLOWER);
//   - INVALID_UPDATE_VERSION: the partition epoch is below the partition's (a proposal
//     made from an older state, including the retry of one already applied: the leader
//     takes the partition's state from the metadata log instead);
//   - INVALID_REQUEST: the ISR is not a set of replicas, leaves out the leader, has more
//     than the leader while RECOVERING, or moves the recovery state from RECOVERED to
//     RECOVERING;
//   - INELIGIBLE_REPLICA (v2+; OPERATION_NOT_ATTEMPTED before): an ISR member that is not
//     registered, is in controlled shutdown, is fenced, or whose broker epoch (v3
//     NewEpochISR; −1 skips the check) is not its registration's.
//
// A valid proposal becomes a PartitionChangeRecord (none when it changes nothing: the
// answer is then the current state) and is answered with the partition's leader, leader
// epoch, partition epoch, ISR and recovery state after it; should the change elect
// another leader, the answer is NEW_LEADER_ELECTED (v2+; FENCED_LEADER_EPOCH before).
// Request-level errors: NOT_CONTROLLER, STALE_BROKER_EPOCH (the requesting broker's
// BrokerID and BrokerEpoch are not a registration), and the errors of the metadata write.
func (c *Controller) AlterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	if c.notActive() {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	im := c.q.Image()
	if b, ok := im.Brokers[req.BrokerID]; !ok || b.Epoch != req.BrokerEpoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp
	}
	var recs []metadata.Record
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionResponseTopic()
		st.Topic, st.TopidID = rt.Topic, rt.TopicID // kmsg spells it TopidID
		var t *metadata.Topic
		if req.Version >= 2 {
			t = im.TopicsByID[rt.TopicID]
		} else {
			t = im.Topics[rt.Topic]
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition = rp.Partition
			if t == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if req.Version >= 2 {
					sp.ErrorCode = kerr.UnknownTopicID.Code
				}
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			isr := proposedISR(req.Version, &rp)
			reg := t.Partition(rp.Partition)
			if code := c.validateAlterPartition(im, req, t, reg, &rp, isr); code != 0 {
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			ch := newChange(im, t.ID, rp.Partition, reg)
			ch.election = onlineOrUnclean(t, c.unclean(im))
			ch.isr = brokerIDs(isr)
			ch.recovery = rp.LeaderRecoveryState
			rec := ch.build()
			if rec != nil {
				recs = append(recs, *rec)
				if rec.Leader != nil && *rec.Leader != req.BrokerID {
					// Only a reassignment completed by the ISR change moves leadership
					// here; the leader must learn the new state from the metadata log.
					c.log.Info("AlterPartition elected another leader", "broker", req.BrokerID, "topic", t.Name, "partition", rp.Partition, "leader", *rec.Leader)
					sp.ErrorCode = kerr.NewLeaderElected.Code
					if req.Version < 2 {
						sp.ErrorCode = kerr.FencedLeaderEpoch.Code
					}
					st.Partitions = append(st.Partitions, sp)
					continue
				}
			}
			after := reg
			if rec != nil {
				after = merge(reg, rec)
			}
			sp.LeaderID, sp.LeaderEpoch, sp.PartitionEpoch = after.Leader, after.LeaderEpoch, after.PartitionEpoch
			sp.ISR, sp.LeaderRecoveryState = slices.Clone(after.ISR), after.LeaderRecoveryState
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(recs) > 0 {
		if _, err := c.apply(ctx, "altering ISRs (AlterPartition)", recs); err != nil {
			return &kmsg.AlterPartitionResponse{Version: req.Version, ErrorCode: errorCode(err)}
		}
	}
	return resp
}

// proposedISR is the ISR a partition of an AlterPartition request proposes, with each
// member's broker epoch: v3's NewEpochISR, or the v0–2 NewISR without epochs (−1).
func proposedISR(version int16, rp *kmsg.AlterPartitionRequestTopicPartition) []kmsg.AlterPartitionRequestTopicPartitionNewEpochISR {
	if version >= 3 {
		return rp.NewEpochISR
	}
	out := make([]kmsg.AlterPartitionRequestTopicPartitionNewEpochISR, len(rp.NewISR))
	for i, id := range rp.NewISR {
		out[i] = kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		out[i].BrokerID = id
	}
	return out
}

func brokerIDs(isr []kmsg.AlterPartitionRequestTopicPartitionNewEpochISR) []int32 {
	out := make([]int32, len(isr))
	for i, s := range isr {
		out[i] = s.BrokerID
	}
	return out
}

// validateAlterPartition returns the error of one partition of an AlterPartition
// request, 0 when it is valid (Kafka's validateAlterPartitionData, in its order).
func (c *Controller) validateAlterPartition(im *metadata.Image, req *kmsg.AlterPartitionRequest, t *metadata.Topic, reg *metadata.PartitionRegistration,
	rp *kmsg.AlterPartitionRequestTopicPartition, isr []kmsg.AlterPartitionRequestTopicPartitionNewEpochISR) int16 {
	where := fmt.Sprintf("%s-%d", t.Name, rp.Partition)
	refuse := func(e *kerr.Error, why string, args ...any) int16 {
		c.log.Info("refused an AlterPartition: "+why, append([]any{"broker", req.BrokerID, "partition", where, "error", e.Message}, args...)...)
		return e.Code
	}
	switch {
	case reg == nil || !reg.Assigned():
		return refuse(kerr.UnknownTopicOrPartition, "no such partition")
	case rp.LeaderEpoch > reg.LeaderEpoch || rp.PartitionEpoch > reg.PartitionEpoch:
		// This controller's image is behind the leader's: it is likely no longer active.
		return refuse(kerr.NotController, "the request's epochs are above the partition's",
			"leaderEpoch", rp.LeaderEpoch, "partitionEpoch", rp.PartitionEpoch, "current.leaderEpoch", reg.LeaderEpoch, "current.partitionEpoch", reg.PartitionEpoch)
	case rp.LeaderEpoch < reg.LeaderEpoch:
		return refuse(kerr.FencedLeaderEpoch, "stale leader epoch", "leaderEpoch", rp.LeaderEpoch, "current", reg.LeaderEpoch)
	case req.BrokerID != reg.Leader:
		return refuse(kerr.InvalidRequest, "the broker is not the leader", "leader", reg.Leader)
	case rp.PartitionEpoch < reg.PartitionEpoch:
		return refuse(kerr.InvalidUpdateVersion, "stale partition epoch", "partitionEpoch", rp.PartitionEpoch, "current", reg.PartitionEpoch)
	}
	ids := brokerIDs(isr)
	if !validISR(reg.Replicas, ids) {
		return refuse(kerr.InvalidRequest, "the ISR is not a set of replicas", "isr", fmt.Sprint(ids), "replicas", fmt.Sprint(reg.Replicas))
	}
	if !slices.Contains(ids, reg.Leader) {
		return refuse(kerr.InvalidRequest, "the ISR leaves out the leader", "isr", fmt.Sprint(ids))
	}
	if rp.LeaderRecoveryState != metadata.LeaderRecovered && rp.LeaderRecoveryState != metadata.LeaderRecovering {
		return refuse(kerr.InvalidRequest, "unknown leader recovery state", "leaderRecoveryState", rp.LeaderRecoveryState)
	}
	if rp.LeaderRecoveryState == metadata.LeaderRecovering && len(ids) > 1 {
		return refuse(kerr.InvalidRequest, "an ISR of more than the leader while it recovers from an unclean election", "isr", fmt.Sprint(ids))
	}
	if reg.LeaderRecoveryState == metadata.LeaderRecovered && rp.LeaderRecoveryState == metadata.LeaderRecovering {
		return refuse(kerr.InvalidRequest, "the leader recovery state cannot change from RECOVERED to RECOVERING")
	}
	for _, s := range isr {
		b, ok := im.Brokers[s.BrokerID]
		why := ""
		switch {
		case !ok:
			why = "not registered"
		case b.InControlledShutdown:
			why = "shutting down"
		case b.Fenced:
			why = "fenced"
		case s.BrokerEpoch != -1 && s.BrokerEpoch != b.Epoch:
			why = fmt.Sprintf("broker epoch mismatch: requested=%d VS expected=%d", s.BrokerEpoch, b.Epoch)
		default:
			continue
		}
		e := kerr.IneligibleReplica
		if req.Version < 2 {
			e = kerr.OperationNotAttempted
		}
		return refuse(e, "an ineligible replica in the ISR", "replica", s.BrokerID, "why", why)
	}
	return 0
}

// validISR reports whether isr is a set of non-negative, distinct replicas (Kafka's
// Replicas.validateIsr).
func validISR(replicas, isr []int32) bool {
	for i, r := range isr {
		if r < 0 || !slices.Contains(replicas, r) || slices.Contains(isr[:i], r) {
			return false
		}
	}
	return true
}
