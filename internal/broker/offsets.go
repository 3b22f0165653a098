package broker

// ListOffsets v1–8, OffsetForLeaderEpoch v2–4, DeleteRecords v0–2 and
// DescribeProducers v0 (Kafka's ReplicaManager.fetchOffset, lastOffsetForLeaderEpoch,
// deleteRecords and Partition.activeProducerState).

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/storage"
)

// Special ListOffsets timestamps (Kafka's ListOffsetsRequest constants).
const (
	latestTimestamp        = -1
	earliestTimestamp      = -2
	maxTimestamp           = -3
	earliestLocalTimestamp = -4
	latestTieredTimestamp  = -5
)

func (b *Broker) handleListOffsets(req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
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
			// past its last fetchable offset (the LSO for read_committed, else the HW).
			lastFetchable, lso := part.HighWatermarkAndLSO()
			if req.IsolationLevel == 1 {
				lastFetchable = lso
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

func (b *Broker) handleOffsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			part, err := b.leader(rt.Topic, rp.Partition)
			if err == nil {
				err = part.CheckLeader(rp.CurrentLeaderEpoch)
			}
			if err != nil {
				sp.ErrorCode = partitionError(err).Code
			} else {
				sp.LeaderEpoch, sp.EndOffset = part.Log().EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *Broker) handleDeleteRecords(req *kmsg.DeleteRecordsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			part, err := b.leader(rt.Topic, rp.Partition)
			if err != nil {
				sp.ErrorCode = partitionError(err).Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			l := part.Log()
			// DeleteRecords has no error message field: the refusal is POLICY_VIOLATION
			// alone (spec §10).
			if ok, msg := b.checkMirrorWrite(rt.Topic, rp.Partition, "delete records"); !ok {
				sp.ErrorCode = kerr.PolicyViolation.Code
				b.logger.Info("DeleteRecords refused", "topic", rt.Topic, "partition", rp.Partition, "reason", msg)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			off := rp.Offset
			if off == -1 { // delete up to the high watermark
				off = l.LogEndOffset()
			}
			if off < 0 || off > l.LogEndOffset() {
				sp.ErrorCode = kerr.OffsetOutOfRange.Code
			} else if err := part.AdvanceLogStartOffset(off); err != nil {
				if e := partitionError(err); e != nil {
					sp.ErrorCode = e.Code
				} else if errors.Is(err, storage.ErrOffsetOutOfRange) {
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
				} else {
					sp.ErrorCode = kerr.KafkaStorageError.Code
				}
			}
			sp.LowWatermark = l.LogStartOffset()
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *Broker) handleDescribeProducers(req *kmsg.DescribeProducersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = p
			part, err := b.leader(rt.Topic, p)
			if err != nil {
				sp.ErrorCode = partitionError(err).Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, e := range part.Log().ProducerEntries() {
				sp.ActiveProducers = append(sp.ActiveProducers, kmsg.DescribeProducersResponseTopicPartitionActiveProducer{
					ProducerID: e.ProducerID, ProducerEpoch: int32(e.ProducerEpoch), LastSequence: e.LastSequence,
					LastTimestamp: e.LastTimestamp, CoordinatorEpoch: e.CoordinatorEpoch, CurrentTxnStartOffset: e.CurrentTxnStartOffset,
				})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
