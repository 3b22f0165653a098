package broker

// CreatePartitions: new partitions placed after the existing ones (topics.go); a mirror
// topic that refuses client writes refuses it (POLICY_VIOLATION, spec §10); a request
// adding more than maxRecordsPerUserOp partitions is refused (POLICY_VIOLATION, as
// Kafka's controller); partitions this broker has no file descriptors for are refused
// with KAFKA_STORAGE_ERROR.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.CreatePartitions, 0, 3, (*Broker).handleCreatePartitions) }

func (b *Broker) handleCreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	if b.createPartitionsTooLarge(req) {
		for _, rt := range req.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, kerr.PolicyViolation.Code, strp(msgTooManyRecords)
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		fail := func(e *kerr.Error, msg string) { st.ErrorCode = e.Code; st.ErrorMessage = strp(msg) }
		t := b.meta.Image().Topics[rt.Topic]
		switch {
		case !b.authorize(ctx, acl.OpAlter, acl.ResourceTopic, rt.Topic): // Kafka: ALTER on the topic
			fail(kerr.TopicAuthorizationFailed, "Authorization failed.")
		case t == nil:
			fail(kerr.UnknownTopicOrPartition, "The topic '"+rt.Topic+"' does not exist.")
		case rt.Count < t.Partitions:
			fail(kerr.InvalidPartitions, fmt.Sprintf("The topic %s currently has %d partition(s); %d would not be an increase.", rt.Topic, t.Partitions, rt.Count))
		case rt.Count == t.Partitions:
			fail(kerr.InvalidPartitions, fmt.Sprintf("Topic already has %d partition(s).", t.Partitions))
		case len(rt.Assignment) > 0:
			fail(kerr.InvalidReplicaAssignment, "manual replica assignment is not supported by kmirror yet")
		default:
			if ok, msg := b.checkMirrorWrite(rt.Topic, -1, "create partitions"); !ok {
				fail(kerr.PolicyViolation, msg)
				break
			}
			if req.ValidateOnly {
				break
			}
			if err := b.CreatePartitions(ctx, rt.Topic, rt.Count); err != nil {
				if e, ok := storageFailure(err); ok {
					fail(e, err.Error())
				} else {
					fail(kerr.UnknownServerError, err.Error())
				}
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// createPartitionsTooLarge reports whether the request would write more than
// maxRecordsPerUserOp partition records (one per new partition of the topics that
// exist). Kafka's controller bounds the records the same way; it refuses such a request
// as a whole here, with the POLICY_VIOLATION its controller answers for an excessively
// large operation (docs/broker.md).
func (b *Broker) createPartitionsTooLarge(req *kmsg.CreatePartitionsRequest) bool {
	im := b.meta.Image()
	records := 0
	for _, rt := range req.Topics {
		if t := im.Topics[rt.Topic]; t != nil && rt.Count > t.Partitions {
			records += int(rt.Count - t.Partitions)
		}
	}
	return records > maxRecordsPerUserOp
}
