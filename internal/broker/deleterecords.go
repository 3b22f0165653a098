package broker

// DeleteRecords (Kafka's ReplicaManager.deleteRecords): the log start offset advanced to
// the requested offset (−1: the high watermark); mirror topics that refuse client writes
// refuse it (POLICY_VIOLATION, spec §10).

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/storage"
)

func init() { register(kmsg.DeleteRecords, 0, 2, (*Broker).handleDeleteRecords) }

func (b *Broker) handleDeleteRecords(ctx context.Context, req *kmsg.DeleteRecordsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		allowed := b.authorize(ctx, acl.OpDelete, acl.ResourceTopic, rt.Topic) // Kafka: DELETE on the topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
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
