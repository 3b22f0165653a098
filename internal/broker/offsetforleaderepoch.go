package broker

// OffsetForLeaderEpoch (Kafka's ReplicaManager.lastOffsetForLeaderEpoch): the end offset
// of a leader epoch from the leader-epoch cache, for clients that check for log
// truncation after a leader change.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetForLeaderEpoch, 2, 4, (*Broker).handleOffsetForLeaderEpoch) }

func (b *Broker) handleOffsetForLeaderEpoch(_ context.Context, req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
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
