package broker

// DescribeTopicPartitions (KIP-966; Kafka 3.8+ admin clients and kafka-topics
// --describe use it before Metadata): every partition's leader, leader epoch, replicas,
// ISR, ELR and offline replicas from the applied image, topics sorted by name, paged by
// ResponsePartitionLimit and Cursor as Kafka's DescribeTopicPartitionsRequestHandler
// does. kmirror has no ELR yet (no KIP-966 elections): ELR and last-known ELR are empty.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/metadata"
)

func init() { register(kmsg.DescribeTopicPartitions, 0, 0, (*Broker).handleDescribeTopicPartitions) }

// maxDescribeTopicPartitions is Kafka's max.request.partition.size.limit default: the
// most partitions one DescribeTopicPartitions response holds.
const maxDescribeTopicPartitions = 2000

func (b *Broker) handleDescribeTopicPartitions(ctx context.Context, req *kmsg.DescribeTopicPartitionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	im := b.rm.Image()
	var names []string
	all := len(req.Topics) == 0
	if all {
		// Kafka's DescribeTopicPartitionsRequestHandler: DESCRIBE on each topic; an
		// all-topics request leaves the others out, a named one is refused.
		for _, name := range im.TopicNames() {
			if b.authorize(ctx, acl.OpDescribe, acl.ResourceTopic, name) {
				names = append(names, name)
			}
		}
	} else {
		for _, rt := range req.Topics {
			names = append(names, rt.Topic)
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	limit := int(req.ResponsePartitionLimit)
	if limit <= 0 || limit > maxDescribeTopicPartitions {
		limit = maxDescribeTopicPartitions
	}
	firstPartition := int32(0)
	if c := req.Cursor; c != nil {
		i, _ := slices.BinarySearch(names, c.Topic)
		names = names[i:]
		if len(names) > 0 && names[0] == c.Topic {
			firstPartition = max(0, c.Partition)
		}
	}
	n := 0
	for ti, name := range names {
		st := kmsg.NewDescribeTopicPartitionsResponseTopic()
		st.Topic = strp(name)
		t := im.Topics[name]
		if !all && !b.authorize(ctx, acl.OpDescribe, acl.ResourceTopic, name) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if t == nil {
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if validateTopicName(name) != nil {
				st.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.TopicID, st.IsInternal = t.ID, isInternalTopic(name)
		start := int32(0)
		if ti == 0 {
			start = firstPartition
		}
		for p := start; p < t.Partitions; p++ {
			if n == limit {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: p}
				resp.Topics = append(resp.Topics, st)
				return resp
			}
			sp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			sp.Partition = p
			sp.LeaderID, sp.LeaderEpoch, sp.Replicas, sp.ISR, sp.OfflineReplicas = b.partitionView(im, t, p)
			if sp.LeaderID == metadata.NoLeader {
				sp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			sp.EligibleLeaderReplicas, sp.LastKnownELR = []int32{}, []int32{}
			if sp.OfflineReplicas == nil {
				sp.OfflineReplicas = []int32{}
			}
			st.Partitions = append(st.Partitions, sp)
			n++
		}
		resp.Topics = append(resp.Topics, st)
		if n == limit && ti+1 < len(names) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: names[ti+1], Partition: 0}
			return resp
		}
	}
	return resp
}
