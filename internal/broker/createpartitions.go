package broker

// CreatePartitions: new partitions placed after the existing ones (topics.go); a mirror
// topic that refuses client writes refuses it (POLICY_VIOLATION, spec §10).

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
				fail(kerr.UnknownServerError, err.Error())
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
