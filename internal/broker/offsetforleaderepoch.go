package broker

// OffsetForLeaderEpoch (Kafka's ReplicaManager.lastOffsetForLeaderEpoch): the end offset
// of a leader epoch from the leader-epoch cache, for clients that check for log
// truncation after a leader change.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.OffsetForLeaderEpoch, 2, 4, (*Broker).handleOffsetForLeaderEpoch) }

func (b *Broker) handleOffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// Kafka's handleOffsetForLeaderEpochRequest: a follower (ReplicaID >= 0) needs
	// CLUSTER_ACTION on the cluster, a client DESCRIBE on each topic.
	followerDenied := req.ReplicaID >= 0 && !b.authorizeCluster(ctx, acl.OpClusterAction)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		var denied int16
		switch {
		case followerDenied:
			denied = kerr.ClusterAuthorizationFailed.Code
		case req.ReplicaID < 0 && !b.authorize(ctx, acl.OpDescribe, acl.ResourceTopic, rt.Topic):
			denied = kerr.TopicAuthorizationFailed.Code
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			if denied != 0 {
				sp.ErrorCode = denied
				st.Partitions = append(st.Partitions, sp)
				continue
			}
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
