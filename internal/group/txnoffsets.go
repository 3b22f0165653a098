package group

import "github.com/kmirror/kmirror/internal/record"

// TxnOffset is one partition's offset of a transactional offset commit
// (TxnOffsetCommit). The transaction coordinator (internal/txn) holds these pending
// until the transaction commits.
type TxnOffset struct {
	Topic     string
	Partition int32
	Offset    Offset
}

// CheckTxnOffsetCommit validates the group fields of a TxnOffsetCommit as Kafka's
// GroupCoordinator.doTxnCommitOffsets does: 0 when the offsets may be held pending,
// else INVALID_GROUP_ID, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
// FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION. A member ID of "" and a
// generation of −1 skip the member checks (TxnOffsetCommit v0–2).
func (c *Coordinator) CheckTxnOffsetCommit(groupID, memberID string, instanceID *string, generation int32) int16 {
	if e := c.groupStatus(groupID, false); e != 0 {
		return e
	}
	g := c.getGroup(groupID, false)
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

// CommitTxnOffsets makes the offsets of a committed transaction visible: they are
// written to the group's partition of __consumer_offsets as ordinary offset commits
// and applied (Kafka's GroupMetadata.completePendingTxnOffsetCommit on a COMMIT
// marker). An absent group is created Empty. Errors are those of the partition log.
func (c *Coordinator) CommitTxnOffsets(groupID string, offsets []TxnOffset) error {
	if len(offsets) == 0 {
		return nil
	}
	g := c.getGroup(groupID, true)
	g.mu.Lock()
	defer g.mu.Unlock()
	recs := make([]record.KV, 0, len(offsets))
	for _, o := range offsets {
		recs = append(recs, offsetRecord(g.id, tp{o.Topic, o.Partition}, offsetEntry{Offset: o.Offset, expireMs: -1}))
	}
	if err := c.appendRecords(g, recs); err != nil {
		return err
	}
	for _, o := range offsets {
		g.offsets[tp{o.Topic, o.Partition}] = offsetEntry{Offset: o.Offset, expireMs: -1}
	}
	return nil
}
