package controller

// ElectLeaders v0–2 on the active controller (Kafka's
// ReplicationControlManager.electLeaders and electLeader; kafka-leader-election):
// preferred-replica and unclean elections asked by an operator.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
)

// Election types of ElectLeaders (Kafka's ElectionType).
const (
	ElectionPreferred int8 = 0
	ElectionUnclean   int8 = 1
)

// ElectLeaders elects leaders for the named partitions, or for every partition when
// Topics is null (kafka-leader-election --all-topic-partitions), as Kafka's controller
// does:
//
//   - PREFERRED (v0, or ElectionType 0): ELECTION_NOT_NEEDED when the preferred replica
//     (the first) leads; else the preferred replica is elected when it is in the ISR and
//     may lead (unfenced, not shutting down) — or, for a partition without a leader,
//     another such ISR member — and PREFERRED_LEADER_NOT_AVAILABLE when nothing changes;
//   - UNCLEAN (ElectionType 1): ELECTION_NOT_NEEDED when the partition has a leader; else
//     the first ISR member that may lead, or failing that the first replica that may lead
//     (ISR = it, leader recovery state RECOVERING), whatever the topic's
//     unclean.leader.election.enable; ELIGIBLE_LEADERS_NOT_AVAILABLE when none may;
//   - UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that does not exist.
//
// With Topics null the partitions whose answer would be ELECTION_NOT_NEEDED are left out.
// Request-level errors (v1+ ErrorCode, and each named partition's): NOT_CONTROLLER,
// INVALID_REQUEST (an unknown election type), REQUEST_TIMED_OUT (TimeoutMillis passed
// before the elections were written) and the errors of the metadata write.
func (c *Controller) ElectLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	if c.notActive() {
		return ElectLeadersError(req, kerr.NotController, "")
	}
	electionType := ElectionPreferred
	if req.Version >= 1 {
		electionType = req.ElectionType
	}
	if electionType != ElectionPreferred && electionType != ElectionUnclean {
		return ElectLeadersError(req, kerr.InvalidRequest, fmt.Sprintf("Unknown election type %d", electionType))
	}
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	im := c.q.Image()
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	var recs []metadata.Record
	result := func(p int32, e *kerr.Error, msg *string) kmsg.ElectLeadersResponseTopicPartition {
		r := kmsg.NewElectLeadersResponseTopicPartition()
		r.Partition, r.ErrorMessage = p, msg
		if e != nil {
			r.ErrorCode = e.Code
		}
		return r
	}
	if req.Topics == nil {
		for _, name := range im.TopicNames() {
			t := im.Topics[name]
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = name
			for p := range t.Partitions {
				e, msg, rec := electLeader(im, name, p, electionType)
				if e == kerr.ElectionNotNeeded {
					continue
				}
				if rec != nil {
					recs = append(recs, *rec)
				}
				rt.Partitions = append(rt.Partitions, result(p, e, msg))
			}
			resp.Topics = append(resp.Topics, rt)
		}
	} else {
		for _, t := range req.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				e, msg, rec := electLeader(im, t.Topic, p, electionType)
				if rec != nil {
					recs = append(recs, *rec)
				}
				rt.Partitions = append(rt.Partitions, result(p, e, msg))
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(recs) > 0 {
		if _, err := c.apply(ctx, "electing leaders (ElectLeaders)", recs); err != nil {
			return ElectLeadersError(req, kerr.TypedErrorForCode(errorCode(err)), err.Error())
		}
		c.log.Info("elected leaders on request", "electionType", electionType, "partitions", len(recs))
	}
	return resp
}

// electLeader is one partition's election of ElectLeaders: the error (nil for an
// election), its message and the change to write (Kafka's
// ReplicationControlManager.electLeader).
func electLeader(im *metadata.Image, topic string, p int32, electionType int8) (*kerr.Error, *string, *metadata.PartitionChangeRecord) {
	t, ok := im.Topics[topic]
	if !ok {
		msg := "No such topic as " + topic
		return kerr.UnknownTopicOrPartition, &msg, nil
	}
	reg := t.Partition(p)
	if reg == nil || !reg.Assigned() {
		msg := fmt.Sprintf("No such partition as %s-%d", topic, p)
		return kerr.UnknownTopicOrPartition, &msg, nil
	}
	if (electionType == ElectionPreferred && reg.HasPreferredLeader()) ||
		(electionType == ElectionUnclean && reg.Leader != metadata.NoLeader) {
		return kerr.ElectionNotNeeded, nil, nil
	}
	ch := newChange(im, t.ID, p, reg)
	ch.election = electPreferred
	if electionType == ElectionUnclean {
		ch.election = electUnclean
	}
	rec := ch.build()
	if rec == nil {
		if electionType == ElectionPreferred {
			return kerr.PreferredLeaderNotAvailable, nil, nil
		}
		return kerr.EligibleLeadersNotAvailable, nil, nil
	}
	return nil, nil, rec
}

// ElectLeadersError is the answer of an ElectLeaders request that failed as a whole
// (Kafka's ElectLeadersRequest.getErrorResponse): the error at the top (v1+) and on
// every partition the request named, with msg ("" for none).
func ElectLeadersError(req *kmsg.ElectLeadersRequest, e *kerr.Error, msg string) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = e.Code
	var m *string
	if msg != "" {
		m = &msg
	}
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, e.Code, m
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
