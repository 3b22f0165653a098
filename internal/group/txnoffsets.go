package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/record"
)

// TxnVerifier runs appendFn only while the transaction of the TxnOffsetCommit's
// producer holds the group's partition of __consumer_offsets and is ongoing, with its
// markers kept from being written until appendFn returns (Kafka 3.6+'s transaction
// verification of a TxnOffsetCommit). It returns 0 after running appendFn, or the
// Kafka error code it answers instead (e.g. INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH,
// INVALID_PRODUCER_ID_MAPPING).
type TxnVerifier func(appendFn func()) int16

// TxnOffsetCommit serves TxnOffsetCommit v0–3 (GroupCoordinator.handleTxnCommitOffsets
// and GroupMetadataManager.storeOffsets with a producer ID): the offsets are appended to
// the group's partition of __consumer_offsets as one transactional batch of the
// request's producer ID and epoch, inside verify (nil: no verification), and held
// pending for that producer until its COMMIT marker makes them the group's committed
// offsets or its ABORT marker drops them (CompleteTxn). An absent group is created Empty
// when the member fields allow it (member ID "" and generation −1 skip the member
// checks; TxnOffsetCommit v0–2 has none). Errors, for every partition: INVALID_GROUP_ID,
// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
// FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, verify's error and the
// append's (as OffsetCommit's); per partition UNKNOWN_TOPIC_OR_PARTITION and
// OFFSET_METADATA_TOO_LARGE.
func (c *Coordinator) TxnOffsetCommit(_ context.Context, req *kmsg.TxnOffsetCommitRequest, verify TxnVerifier) *kmsg.TxnOffsetCommitResponse {
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	resp.Version = req.Version
	memberID, generation, instanceID := "", int32(-1), (*string)(nil)
	if req.Version >= 3 {
		memberID, generation, instanceID = req.MemberID, req.Generation, req.InstanceID
	}
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	defer func() {
		for i, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
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
	if e := c.groupStatus(req.Group, false); e != 0 {
		setAll(e)
		return resp
	}
	g, e := c.getGroup(req.Group, false)
	if e == 0 {
		e = c.validateTxnCommit(g, memberID, instanceID, generation)
	}
	if e != 0 {
		setAll(e)
		return resp
	}
	now := nowMs()
	type commit struct {
		i, j int
		t    kafka.TopicPartition
		e    offsetEntry
	}
	var commits []commit
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			switch {
			case c.opts.TopicPartitionExists != nil && !c.opts.TopicPartitionExists(t.Topic, p.Partition):
				codes[i][j] = errUnknownTopicOrPartition
			case len(meta) > MaxOffsetMetadataBytes:
				codes[i][j] = errOffsetMetadataTooLarge
			default:
				le := int32(-1)
				if req.Version >= 2 {
					le = p.LeaderEpoch
				}
				commits = append(commits, commit{i, j, kafka.TopicPartition{Topic: t.Topic, Partition: p.Partition},
					offsetEntry{Offset: Offset{Offset: p.Offset, LeaderEpoch: le, Metadata: meta, CommitTimestampMs: now}, expireMs: -1}})
			}
		}
	}
	if len(commits) == 0 {
		return resp
	}
	var code int16
	appendFn := func() {
		g, e := c.getGroup(req.Group, true)
		if e != 0 {
			code = e
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if e := c.validateTxnCommitLocked(g, memberID, instanceID, generation); e != 0 {
			code = e
			return
		}
		recs := make([]record.KV, 0, len(commits))
		for _, cm := range commits {
			recs = append(recs, offsetRecord(g.id, cm.t, cm.e))
		}
		l, err := c.partitionLog(g.partition)
		var base int64
		if err == nil {
			base, err = l.AppendTransactional(recs, req.ProducerID, req.ProducerEpoch)
		}
		if err != nil {
			c.log.Warn("transactional append to __consumer_offsets failed", "group", g.id, "partition", g.partition,
				"producer.id", req.ProducerID, "epoch", req.ProducerEpoch, "err", err)
			code = storeErrorCode(err)
			return
		}
		pending := g.pendingTxn[req.ProducerID]
		if pending == nil {
			pending = make(map[kafka.TopicPartition]offsetEntry)
			g.pendingTxn[req.ProducerID] = pending
		}
		for _, cm := range commits {
			cm.e.batchOffset = base
			pending[cm.t] = cm.e
		}
		c.mu.Lock()
		c.addOpenTxnLocked(req.ProducerID, g.id)
		c.mu.Unlock()
	}
	if verify == nil {
		appendFn()
	} else if e := verify(appendFn); e != 0 {
		code = e
	}
	for _, cm := range commits {
		codes[cm.i][cm.j] = code
	}
	return resp
}

// validateTxnCommit is validateOffsetCommit with isTransactional for a group that may
// be absent (g nil): an absent group accepts a commit without member checks.
func (c *Coordinator) validateTxnCommit(g *group, memberID string, instanceID *string, generation int32) int16 {
	if g == nil {
		switch {
		case memberID != "":
			return errUnknownMemberID
		case generation >= 0:
			return errIllegalGeneration
		}
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return c.validateTxnCommitLocked(g, memberID, instanceID, generation)
}

// validateTxnCommitLocked is GroupCoordinator.validateOffsetCommit with isTransactional:
// COORDINATOR_NOT_AVAILABLE (Dead: deleted or unloaded meanwhile), FENCED_INSTANCE_ID,
// UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION. The caller holds g.mu.
func (c *Coordinator) validateTxnCommitLocked(g *group, memberID string, instanceID *string, generation int32) int16 {
	switch {
	case g.is(Dead):
		return errCoordinatorNotAvailable
	case g.isStaticMemberFenced(memberID, instanceID):
		return errFencedInstanceID
	case memberID != "" && g.members[memberID] == nil:
		return errUnknownMemberID
	case generation >= 0 && generation != g.generation:
		return errIllegalGeneration
	}
	return 0
}

// CompleteTxn applies a COMMIT (commit true) or ABORT marker of producerID that was
// just appended to partition p of __consumer_offsets: the producer's pending
// transactional offsets in the groups of p become their committed offsets (unless a
// later commit is already there) or are dropped (Kafka's
// GroupCoordinator.scheduleHandleTxnCompletion / onTransactionCompleted →
// GroupMetadataManager.handleTxnCompletion). The broker calls it after appending the
// marker; for a partition not loaded here it does nothing (a load in progress replays
// the marker from the log). Applying the same marker twice is harmless.
func (c *Coordinator) CompleteTxn(p int32, producerID int64, commit bool) {
	c.mu.Lock()
	if part := c.parts[p]; part == nil || part.state != partLoaded {
		c.mu.Unlock()
		return
	}
	var groups []*group
	for id := range c.txnOpen[producerID] {
		if c.PartitionFor(id) != p {
			continue
		}
		if g := c.groups[id]; g != nil {
			groups = append(groups, g)
		}
		c.dropOpenTxnLocked(producerID, id)
	}
	c.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		if !g.is(Dead) {
			g.completePendingTxn(producerID, commit)
		}
		g.mu.Unlock()
	}
}
