package group

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/record"
)

// Record key versions of __consumer_offsets (GroupCoordinatorRecordSerde): 0 and 1 are
// offset commits, 2 is group metadata; 3 and above are KIP-848/share group records,
// which this coordinator skips when loading.
const (
	offsetKeyVersion = 1
	groupKeyVersion  = 2
	// offsetValueVersion is what Kafka 4 writes without an expire timestamp; version 1
	// carries the ExpireTimestamp of OffsetCommit v2-v4 retention times.
	offsetValueVersion = 3
	groupValueVersion  = 3
)

func offsetKey(group string, t kafka.TopicPartition) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: t.Topic, Partition: t.Partition}
	return k.AppendTo(nil)
}

func offsetRecord(group string, t kafka.TopicPartition, o offsetEntry) record.KV {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	v.Offset = o.Offset.Offset
	v.LeaderEpoch = o.LeaderEpoch
	v.Metadata = o.Metadata
	v.CommitTimestamp = o.CommitTimestampMs
	if o.expireMs >= 0 {
		v.Version = 1
		v.ExpireTimestamp = o.expireMs
	}
	return record.KV{Key: offsetKey(group, t), Value: v.AppendTo(nil)}
}

func offsetTombstone(group string, t kafka.TopicPartition) record.KV {
	return record.KV{Key: offsetKey(group, t)}
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

// groupRecord is GroupCoordinatorRecordHelpers.newGroupMetadataRecord: assignment gives
// each member's assignment (nil: the members' current ones).
func groupRecord(g *group, assignment map[string][]byte) record.KV {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	if g.protocolType != nil {
		v.ProtocolType = *g.protocolType
	}
	v.Generation = g.generation
	v.Protocol = g.protocol
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = g.stateTs
	for _, id := range g.order {
		m := g.members[id]
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		vm.InstanceID = m.instanceID
		vm.ClientID = m.clientID
		vm.ClientHost = m.clientHost
		vm.RebalanceTimeoutMillis = m.rebalanceTimeoutMs
		vm.SessionTimeoutMillis = m.sessionTimeoutMs
		if g.protocol != nil {
			vm.Subscription = m.metadataFor(*g.protocol)
		}
		if assignment != nil {
			vm.Assignment = assignment[m.id]
		} else {
			vm.Assignment = m.assignment
		}
		if vm.Subscription == nil {
			vm.Subscription = []byte{}
		}
		if vm.Assignment == nil {
			vm.Assignment = []byte{}
		}
		v.Members = append(v.Members, vm)
	}
	return record.KV{Key: groupKey(g.id), Value: v.AppendTo(nil)}
}

// storeGroup writes the group's metadata record (GroupMetadataManager.storeGroup).
func (c *Coordinator) storeGroup(g *group, assignment map[string][]byte) error {
	_, err := c.appendRecords(g, []record.KV{groupRecord(g, assignment)})
	return err
}

// storeErrorCode maps a failed append to __consumer_offsets to the error the client gets,
// as GroupMetadataManager does; a plain I/O error is COORDINATOR_NOT_AVAILABLE
// (retriable).
func storeErrorCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
			return errCoordinatorNotAvailable
		case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
			return errNotCoordinator
		case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
			return kerr.InvalidCommitOffsetSize.Code
		}
		return ke.Code
	}
	return errCoordinatorNotAvailable
}

// loadState replays the batches of one partition of __consumer_offsets
// (GroupMetadataManager.doLoadGroupsAndOffsets): later records win, tombstones delete;
// offsets of a transactional batch are pending for its producer until that producer's
// COMMIT marker (which makes those not older than the committed ones the committed
// offsets) or ABORT marker (which drops them).
type loadState struct {
	offsets map[string]map[kafka.TopicPartition]offsetEntry
	pending map[int64]map[string]map[kafka.TopicPartition]offsetEntry // producer ID → group → partition
	groups  map[string]*kmsg.GroupMetadataValue
	skipped int
}

func newLoadState() *loadState {
	return &loadState{offsets: make(map[string]map[kafka.TopicPartition]offsetEntry), pending: make(map[int64]map[string]map[kafka.TopicPartition]offsetEntry),
		groups: make(map[string]*kmsg.GroupMetadataValue)}
}

func (s *loadState) apply(b record.Batch) error {
	pid := b.ProducerID()
	if b.IsControl() {
		if b.RecordCount() == 0 {
			return nil // Kafka reads the marker's first record; an emptied batch has none
		}
		typ, err := b.ControlType()
		if err != nil {
			s.skipped++
			return nil
		}
		switch typ {
		case record.ControlCommit:
			for id, offs := range s.pending[pid] {
				for t, e := range offs {
					if cur, ok := s.offsets[id][t]; !ok || cur.batchOffset < e.batchOffset {
						if s.offsets[id] == nil {
							s.offsets[id] = make(map[kafka.TopicPartition]offsetEntry)
						}
						s.offsets[id][t] = e
					}
				}
			}
			delete(s.pending, pid)
		case record.ControlAbort:
			delete(s.pending, pid)
		}
		return nil
	}
	txn := b.IsTransactional()
	base := b.BaseOffset()
	it := record.IterRecords(b)
	for it.Next() {
		r := it.Record()
		s.applyRecord(base, txn, pid, r.Key, r.Value)
	}
	return it.Err()
}

func (s *loadState) applyRecord(base int64, txn bool, pid int64, key, value []byte) {
	if len(key) < 2 {
		s.skipped++
		return
	}
	switch version := int16(key[0])<<8 | int16(key[1]); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			s.skipped++
			return
		}
		t := kafka.TopicPartition{Topic: k.Topic, Partition: k.Partition}
		if value == nil {
			if txn {
				delete(s.pending[pid][k.Group], t)
				return
			}
			// A tombstone deletes the committed offset and the pending transactional
			// ones of the partition (Kafka 4's OffsetMetadataManager.replay).
			delete(s.offsets[k.Group], t)
			for _, byGroup := range s.pending {
				delete(byGroup[k.Group], t)
			}
			return
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			s.skipped++
			return
		}
		e := offsetEntry{Offset: Offset{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTimestampMs: v.CommitTimestamp},
			expireMs: -1, batchOffset: base}
		if v.Version >= 3 {
			e.LeaderEpoch = v.LeaderEpoch
		}
		if v.Version == 1 && v.ExpireTimestamp >= 0 {
			e.expireMs = v.ExpireTimestamp
		}
		m := s.offsets
		if txn {
			m = s.pending[pid]
			if m == nil {
				m = make(map[string]map[kafka.TopicPartition]offsetEntry)
				s.pending[pid] = m
			}
		}
		if m[k.Group] == nil {
			m[k.Group] = make(map[kafka.TopicPartition]offsetEntry)
		}
		m[k.Group][t] = e
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			s.skipped++
			return
		}
		if value == nil {
			delete(s.groups, k.Group)
			return
		}
		v := new(kmsg.GroupMetadataValue)
		if err := v.ReadFrom(value); err != nil {
			s.skipped++
			return
		}
		s.groups[k.Group] = v
	}
}

// build turns the replayed records into groups: a group with members is Stable, one
// without is Empty; offsets (committed or pending) without group metadata make an Empty
// group with no protocol type (a simple consumer's, or a transactional producer's). It
// also returns, per producer ID, the groups holding its pending offsets.
func (s *loadState) build(c *Coordinator) (map[string]*group, map[int64][]string) {
	out := make(map[string]*group)
	for id, v := range s.groups {
		g := newGroup(id, c.PartitionFor(id), -1)
		g.stateTs = v.CurrentStateTimestamp
		if v.ProtocolType != "" {
			pt := v.ProtocolType
			g.protocolType = &pt
		}
		g.generation = v.Generation
		if v.Protocol != nil && *v.Protocol != "" {
			p := *v.Protocol
			g.protocol = &p
		}
		if v.Leader != nil {
			g.leader = *v.Leader
		}
		for _, vm := range v.Members {
			m := &member{
				id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
				rebalanceTimeoutMs: vm.RebalanceTimeoutMillis, sessionTimeoutMs: vm.SessionTimeoutMillis,
				assignment: vm.Assignment,
			}
			if v.Version == 0 {
				m.rebalanceTimeoutMs = m.sessionTimeoutMs
			}
			if g.protocolType != nil {
				m.protocolType = *g.protocolType
			}
			if g.protocol != nil {
				m.protocols = []protocol{{name: *g.protocol, metadata: vm.Subscription}}
			}
			g.members[m.id] = m
			g.order = append(g.order, m.id)
			if m.instanceID != nil {
				g.static[*m.instanceID] = m.id
			}
		}
		if len(g.members) > 0 && g.protocol != nil {
			g.state = Stable
		} else {
			g.members, g.order, g.static = map[string]*member{}, nil, map[string]string{}
			g.leader, g.protocol = "", nil
		}
		g.computeSubscribed()
		out[id] = g
	}
	get := func(id string) *group {
		g := out[id]
		if g == nil {
			g = newGroup(id, c.PartitionFor(id), time.Now().UnixMilli())
			out[id] = g
		}
		return g
	}
	for id, offs := range s.offsets {
		if len(offs) > 0 {
			get(id).offsets = offs
		}
	}
	open := make(map[int64][]string)
	for pid, byGroup := range s.pending {
		for id, offs := range byGroup {
			if len(offs) == 0 {
				continue
			}
			g := get(id)
			if g.pendingTxn == nil {
				g.pendingTxn = make(map[int64]map[kafka.TopicPartition]offsetEntry)
			}
			g.pendingTxn[pid] = offs
			open[pid] = append(open[pid], id)
		}
	}
	return out, open
}
