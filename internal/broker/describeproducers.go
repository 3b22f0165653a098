package broker

// DescribeProducers (Kafka's Partition.activeProducerState): the active producers of each
// partition this broker leads, from the log's producer state.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.DescribeProducers, 0, 0, (*Broker).handleDescribeProducers) }

func (b *Broker) handleDescribeProducers(ctx context.Context, req *kmsg.DescribeProducersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		allowed := b.authorize(ctx, acl.OpRead, acl.ResourceTopic, rt.Topic) // Kafka: READ on the topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = p
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
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
