package group

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/record"
)

// OffsetCommit serves OffsetCommit v0-v9 (GroupCoordinator.handleCommitOffsets, with the
// validation of Kafka 4's ClassicGroup.validateOffsetCommit). A commit with generation
// -1 and no member ID is a simple commit, accepted while the group has no members (it
// creates the group if absent). Per-partition errors: INVALID_GROUP_ID (longer than
// MaxGroupIDLen), COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, UNKNOWN_TOPIC_OR_PARTITION,
// OFFSET_METADATA_TOO_LARGE, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND
// from v9 for an absent group), FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE; v10 (topic IDs) is answered UNSUPPORTED_VERSION.
func (c *Coordinator) OffsetCommit(_ context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := kmsg.NewPtrOffsetCommitResponse()
	resp.Version = req.Version
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	defer func() {
		for i, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for j, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}()
	setAll := func(code int16) {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = code
				}
			}
		}
	}
	if req.Version >= 10 {
		setAll(errUnsupportedVersion)
		return resp
	}
	if e := c.groupStatus(req.Group, true); e != 0 {
		setAll(e)
		return resp
	}
	now := nowMs()
	expire := int64(-1)
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis >= 0 {
		expire = now + req.RetentionTimeMillis
	}
	type commit struct {
		i, j int
		t    kafka.TopicPartition
		e    offsetEntry
	}
	var commits []commit
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			if c.opts.TopicPartitionExists != nil && !c.opts.TopicPartitionExists(t.Topic, p.Partition) {
				codes[i][j] = errUnknownTopicOrPartition
				continue
			}
			var meta string
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			if len(meta) > MaxOffsetMetadataBytes {
				codes[i][j] = errOffsetMetadataTooLarge
				continue
			}
			e := offsetEntry{Offset: Offset{Offset: p.Offset, LeaderEpoch: -1, Metadata: meta, CommitTimestampMs: now}, expireMs: expire}
			if req.Version >= 6 {
				e.LeaderEpoch = p.LeaderEpoch
			}
			if req.Version == 1 && p.Timestamp >= 0 {
				e.CommitTimestampMs = p.Timestamp
			}
			commits = append(commits, commit{i, j, kafka.TopicPartition{Topic: t.Topic, Partition: p.Partition}, e})
		}
	}
	if len(commits) == 0 {
		return resp
	}
	g, e := c.getGroup(req.Group, req.Generation < 0)
	if e != 0 {
		setAll(e)
		return resp
	}
	if g == nil {
		// Only a member of an older generation can commit to an absent group.
		if req.Version >= 9 {
			setAll(errGroupIDNotFound)
		} else {
			setAll(errIllegalGeneration)
		}
		return resp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := c.validateCommit(g, req); e != 0 {
		setAll(e)
		return resp
	}
	recs := make([]record.KV, 0, len(commits))
	for _, cm := range commits {
		recs = append(recs, offsetRecord(g.id, cm.t, cm.e))
	}
	base, err := c.appendRecords(g, recs)
	if err != nil {
		setAll(storeErrorCode(err))
		return resp
	}
	for _, cm := range commits {
		cm.e.batchOffset = base
		g.offsets[cm.t] = cm.e
	}
	return resp
}

// validateCommit is ClassicGroup.validateOffsetCommit; on success a known member's
// session is extended, as a heartbeat.
func (c *Coordinator) validateCommit(g *group, req *kmsg.OffsetCommitRequest) int16 {
	if g.is(Dead) {
		return errCoordinatorNotAvailable
	}
	if req.Generation < 0 && g.is(Empty) {
		return 0 // simple commit: the group only stores offsets in Kafka
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if g.isStaticMemberFenced(req.MemberID, req.InstanceID) {
			return errFencedInstanceID
		}
		m := g.members[req.MemberID]
		if m == nil {
			return errUnknownMemberID
		}
		if req.Generation != g.generation {
			return errIllegalGeneration
		}
		if g.is(CompletingRebalance) {
			return errRebalanceInProgress
		}
		c.scheduleHeartbeat(g, m, time.Duration(m.sessionTimeoutMs)*time.Millisecond)
		return 0
	}
	// Version 0 carries no member: commits are accepted only while the group is Empty.
	return errUnknownMemberID
}

// OffsetFetch serves OffsetFetch v0-v9 (several groups per request from v8;
// GroupCoordinator.handleFetchOffsets). Offsets are returned whatever the group's state;
// a partition without a committed offset gets offset -1, leader epoch -1, metadata "".
// With RequireStable (v7+), a partition with pending transactional offsets gets
// UNSTABLE_OFFSET_COMMIT (GroupMetadataManager.getOffsets). Group errors:
// INVALID_GROUP_ID, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE; v10 (topic IDs) is answered UNSUPPORTED_VERSION.
func (c *Coordinator) OffsetFetch(_ context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = req.Version
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			out := kmsg.NewOffsetFetchResponseGroup()
			out.Group = rg.Group
			if req.Version >= 10 {
				out.ErrorCode = errUnsupportedVersion
				resp.Groups = append(resp.Groups, out)
				continue
			}
			var topics []fetchTopic
			if rg.Topics != nil {
				topics = make([]fetchTopic, 0, len(rg.Topics))
				for _, t := range rg.Topics {
					topics = append(topics, fetchTopic{t.Topic, t.Partitions})
				}
			}
			code, res := c.fetchOffsets(rg.Group, topics, rg.Topics == nil, req.RequireStable)
			out.ErrorCode = code
			for _, t := range res {
				ot := kmsg.NewOffsetFetchResponseGroupTopic()
				ot.Topic = t.topic
				for _, p := range t.partitions {
					op := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					op.Partition, op.Offset, op.LeaderEpoch, op.ErrorCode = p.partition, p.Offset.Offset, p.LeaderEpoch, p.err
					meta := p.Metadata
					op.Metadata = &meta
					ot.Partitions = append(ot.Partitions, op)
				}
				out.Topics = append(out.Topics, ot)
			}
			resp.Groups = append(resp.Groups, out)
		}
		return resp
	}
	var topics []fetchTopic
	if req.Topics != nil {
		for _, t := range req.Topics {
			topics = append(topics, fetchTopic{t.Topic, t.Partitions})
		}
	}
	code, res := c.fetchOffsets(req.Group, topics, req.Topics == nil && req.Version >= 2, req.Version >= 7 && req.RequireStable)
	resp.ErrorCode = code
	if code != 0 && req.Version < 2 {
		// v0-v1 have no top-level error: every requested partition carries it.
		for _, t := range topics {
			ot := kmsg.NewOffsetFetchResponseTopic()
			ot.Topic = t.topic
			for _, p := range t.partitions {
				op := kmsg.NewOffsetFetchResponseTopicPartition()
				op.Partition, op.Offset, op.LeaderEpoch, op.ErrorCode = p, -1, -1, code
				empty := ""
				op.Metadata = &empty
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		return resp
	}
	for _, t := range res {
		ot := kmsg.NewOffsetFetchResponseTopic()
		ot.Topic = t.topic
		for _, p := range t.partitions {
			op := kmsg.NewOffsetFetchResponseTopicPartition()
			op.Partition, op.Offset, op.LeaderEpoch, op.ErrorCode = p.partition, p.Offset.Offset, p.LeaderEpoch, p.err
			meta := p.Metadata
			op.Metadata = &meta
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}

type fetchTopic struct {
	topic      string
	partitions []int32
}

type fetchedPartition struct {
	partition int32
	Offset
	err int16
}

type fetchedTopic struct {
	topic      string
	partitions []fetchedPartition
}

// fetchOffsets returns the committed offsets of the requested partitions (all when
// all); with stable, partitions with pending transactional offsets get
// UNSTABLE_OFFSET_COMMIT.
func (c *Coordinator) fetchOffsets(groupID string, topics []fetchTopic, all, stable bool) (int16, []fetchedTopic) {
	if e := c.groupStatus(groupID, true); e != 0 {
		return e, nil
	}
	g, e := c.getGroup(groupID, false)
	if e != 0 {
		return e, nil
	}
	var offs map[kafka.TopicPartition]offsetEntry
	unstable := func(kafka.TopicPartition) bool { return false }
	if g != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.is(Dead) {
			offs = g.offsets
			if stable {
				unstable = g.hasPendingTxn
			}
		}
	}
	fetched := func(t kafka.TopicPartition) fetchedPartition {
		if unstable(t) {
			return fetchedPartition{partition: t.Partition, Offset: Offset{Offset: -1, LeaderEpoch: -1}, err: errUnstableOffsetCommit}
		}
		o, ok := offs[t]
		if !ok {
			o.Offset = Offset{Offset: -1, LeaderEpoch: -1}
		}
		return fetchedPartition{partition: t.Partition, Offset: o.Offset}
	}
	if all {
		byTopic := make(map[string]int)
		var out []fetchedTopic
		for _, t := range sortedTPs(offs) {
			i, ok := byTopic[t.Topic]
			if !ok {
				i = len(out)
				byTopic[t.Topic] = i
				out = append(out, fetchedTopic{topic: t.Topic})
			}
			out[i].partitions = append(out[i].partitions, fetched(t))
		}
		return 0, out
	}
	out := make([]fetchedTopic, 0, len(topics))
	for _, t := range topics {
		ft := fetchedTopic{topic: t.topic}
		for _, p := range t.partitions {
			ft.partitions = append(ft.partitions, fetched(kafka.TopicPartition{Topic: t.topic, Partition: p}))
		}
		out = append(out, ft)
	}
	return 0, out
}

// OffsetDelete serves OffsetDelete v0+ (GroupCoordinator.handleDeleteOffsets): offsets of
// an Empty group, or of topics a consumer group is not subscribed to, are deleted
// (tombstones, which also drop pending transactional offsets of those partitions).
// Errors: INVALID_GROUP_ID, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a non-consumer group with members), per partition
// GROUP_SUBSCRIBED_TO_TOPIC and UNKNOWN_TOPIC_OR_PARTITION.
func (c *Coordinator) OffsetDelete(_ context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	resp.Version = req.Version
	if e := c.groupStatus(req.Group, false); e != 0 {
		resp.ErrorCode = e
		return resp
	}
	g, e := c.getGroup(req.Group, false)
	if e != 0 {
		resp.ErrorCode = e
		return resp
	}
	if g == nil {
		resp.ErrorCode = errGroupIDNotFound
		return resp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.is(Dead):
		resp.ErrorCode = errGroupIDNotFound
		return resp
	case !g.is(Empty) && !g.protocolTypeIs("consumer"):
		resp.ErrorCode = errNonEmptyGroup
		return resp
	}
	codes := make([][]int16, len(req.Topics))
	var recs []record.KV
	var removed []kafka.TopicPartition
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		for j, p := range t.Partitions {
			switch {
			case c.opts.TopicPartitionExists != nil && !c.opts.TopicPartitionExists(t.Topic, p.Partition):
				codes[i][j] = errUnknownTopicOrPartition
			case !g.is(Empty) && g.isSubscribedTo(t.Topic):
				codes[i][j] = errGroupSubscribedToTopic
			default:
				k := kafka.TopicPartition{Topic: t.Topic, Partition: p.Partition}
				if _, ok := g.offsets[k]; ok {
					recs = append(recs, offsetTombstone(g.id, k))
					removed = append(removed, k)
				}
			}
		}
	}
	if _, err := c.appendRecords(g, recs); err != nil {
		resp.ErrorCode = storeErrorCode(err)
		return resp
	}
	for _, k := range removed {
		g.deleteOffset(k)
	}
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// expireOffsets is GroupMetadataManager.cleanupGroupMetadata with
// GroupMetadata.removeExpiredOffsets (Kafka 2.1+ semantics): offsets of an Empty group
// expire once the group has been Empty for offsets.retention.ms; offsets of a group
// without protocol type (simple commits) expire retention after their commit; a Stable
// consumer group's offsets of topics no member subscribes to expire retention after
// their commit; an explicit v1 expire timestamp wins. An offset with pending
// transactional offsets of the same partition does not expire (Kafka 4's
// OffsetMetadataManager.cleanupExpiredOffsets). An Empty group left without offsets,
// committed or pending, becomes Dead and is deleted (tombstone).
func (c *Coordinator) expireOffsets(now int64) {
	retention := c.opts.OffsetsRetentionMs
	for _, g := range c.allGroups() {
		g.mu.Lock()
		if g.is(Dead) {
			g.mu.Unlock()
			continue
		}
		var expired []kafka.TopicPartition
		expiredBy := func(base func(offsetEntry) int64, subscribed map[string]bool) {
			for k, o := range g.offsets {
				if (subscribed != nil && subscribed[k.Topic]) || g.hasPendingTxn(k) {
					continue
				}
				if o.expireMs >= 0 {
					if now >= o.expireMs {
						expired = append(expired, k)
					}
				} else if now-base(o) >= retention {
					expired = append(expired, k)
				}
			}
		}
		commitTs := func(o offsetEntry) int64 { return o.CommitTimestampMs }
		switch {
		case g.protocolType == nil:
			expiredBy(commitTs, nil)
		case g.is(Empty):
			expiredBy(func(o offsetEntry) int64 {
				if g.stateTs >= 0 {
					return g.stateTs
				}
				return o.CommitTimestampMs
			}, nil)
		case g.protocolTypeIs("consumer") && g.subscribed != nil && g.is(Stable):
			expiredBy(commitTs, g.subscribed)
		}
		var recs []record.KV
		for _, k := range expired {
			recs = append(recs, offsetTombstone(g.id, k))
		}
		dead := g.is(Empty) && len(g.offsets) == len(expired) && len(g.members) == 0 && len(g.pending) == 0 && len(g.pendingTxn) == 0
		if dead {
			recs = append(recs, record.KV{Key: groupKey(g.id)})
		}
		if len(recs) > 0 {
			if _, err := c.appendRecords(g, recs); err != nil {
				g.mu.Unlock()
				continue
			}
			for _, k := range expired {
				g.deleteOffset(k)
			}
			if dead {
				g.stopTimers()
				g.transition(Dead)
				c.removeGroup(g)
			}
			c.log.Info("expired offsets", "group", g.id, "offsets", len(expired), "group_removed", dead)
		}
		g.mu.Unlock()
	}
}
