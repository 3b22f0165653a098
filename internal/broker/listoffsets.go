package broker

// ListOffsets (Kafka's ReplicaManager.fetchOffset and Partition.fetchOffsetForTimestamp):
// the offset of a timestamp, or of the special timestamps below, up to the last offset a
// consumer may fetch.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.ListOffsets, 1, 8, (*Broker).handleListOffsets) }

// Special ListOffsets timestamps (Kafka's ListOffsetsRequest constants).
const (
	latestTimestamp        = -1
	earliestTimestamp      = -2
	maxTimestamp           = -3
	earliestLocalTimestamp = -4
	latestTieredTimestamp  = -5
)

func (b *Broker) handleListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		allowed := b.authorize(ctx, acl.OpDescribe, acl.ResourceTopic, rt.Topic) // Kafka: DESCRIBE
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			part, err := b.leader(rt.Topic, rp.Partition)
			if err == nil {
				err = part.CheckLeader(rp.CurrentLeaderEpoch)
			}
			if err != nil {
				sp.ErrorCode = partitionError(err).Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			l, epoch := part.Log(), part.LeaderEpoch()
			// Kafka's Partition.fetchOffsetForTimestamp: a consumer sees nothing at or
			// past its last fetchable offset (the LSO for read_committed, else the HW); a
			// replica (ReplicaId ≥ 0) sees the whole log. While a new leader's HW is below
			// the start of its leader epoch, consumers get OFFSET_NOT_AVAILABLE: the HW
			// it inherited may be behind the one the old leader gave out.
			hw, lso := part.HighWatermarkAndLSO()
			lastFetchable := hw
			switch {
			case req.ReplicaID >= 0:
				lastFetchable = l.LogEndOffset()
			case req.IsolationLevel == 1:
				lastFetchable = lso
			}
			if req.ReplicaID == -1 && part.LeaderEpochStartOffset() > hw {
				sp.ErrorCode = kerr.OffsetNotAvailable.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			switch rp.Timestamp {
			case latestTimestamp:
				sp.Offset = lastFetchable
				sp.LeaderEpoch = epoch
			case latestTieredTimestamp:
				// No tiered storage: Kafka's UnifiedLog answers offset −1 without an error.
			case earliestTimestamp, earliestLocalTimestamp:
				sp.Offset = l.LogStartOffset()
				sp.LeaderEpoch = l.EpochForOffset(sp.Offset)
			case maxTimestamp:
				if off, t := l.MaxTimestamp(); off >= 0 && off < lastFetchable {
					sp.Offset, sp.Timestamp = off, t
					sp.LeaderEpoch = l.EpochForOffset(off)
				}
			default:
				if rp.Timestamp < 0 {
					sp.ErrorCode = kerr.InvalidRequest.Code
					break
				}
				off, t, found, err := l.OffsetForTimestamp(rp.Timestamp)
				if err != nil {
					sp.ErrorCode = kerr.KafkaStorageError.Code
					break
				}
				if found && off < lastFetchable {
					sp.Offset, sp.Timestamp = off, t
					sp.LeaderEpoch = l.EpochForOffset(off)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
