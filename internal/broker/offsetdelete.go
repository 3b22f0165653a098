package broker

// OffsetDelete, served by the group coordinator (internal/group). Authorization as
// Kafka's handleDeleteOffsetsRequest: DELETE on the group (else GROUP_AUTHORIZATION_FAILED)
// and READ on each topic (else its partitions are TOPIC_AUTHORIZATION_FAILED and keep
// their offsets).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.OffsetDelete, 0, 0, (*Broker).handleOffsetDelete) }

func (b *Broker) handleOffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	if !b.authorize(ctx, acl.OpDelete, acl.ResourceGroup, req.Group) {
		return refuse(req.ResponseKind(), kerr.GroupAuthorizationFailed)
	}
	var allowed, denied []kmsg.OffsetDeleteRequestTopic
	for _, t := range req.Topics {
		if b.authorize(ctx, acl.OpRead, acl.ResourceTopic, t.Topic) {
			allowed = append(allowed, t)
		} else {
			denied = append(denied, t)
		}
	}
	if len(denied) == 0 {
		return b.groups.OffsetDelete(ctx, req)
	}
	sub := *req
	sub.Topics = allowed
	resp := b.groups.OffsetDelete(ctx, &sub)
	for _, t := range denied {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
