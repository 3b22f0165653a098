package broker

// OffsetCommit, served by the group coordinator (internal/group), which writes the
// offsets to the group's partition of __consumer_offsets. Authorization as Kafka's
// handleOffsetCommitRequest: READ on the group (else every partition is
// GROUP_AUTHORIZATION_FAILED) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.OffsetCommit, 2, 9, (*Broker).handleOffsetCommit) }

func (b *Broker) handleOffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) kmsg.Response {
	groupAllowed := b.authorize(ctx, acl.OpRead, acl.ResourceGroup, req.Group)
	var allowed, denied []kmsg.OffsetCommitRequestTopic
	for _, t := range req.Topics {
		if groupAllowed && b.authorize(ctx, acl.OpRead, acl.ResourceTopic, t.Topic) {
			allowed = append(allowed, t)
		} else {
			denied = append(denied, t)
		}
	}
	if len(denied) == 0 {
		return b.groups.OffsetCommit(ctx, req)
	}
	var resp *kmsg.OffsetCommitResponse
	if len(allowed) > 0 {
		sub := *req
		sub.Topics = allowed
		resp = b.groups.OffsetCommit(ctx, &sub)
	} else {
		resp = req.ResponseKind().(*kmsg.OffsetCommitResponse)
	}
	code := kerr.TopicAuthorizationFailed.Code
	if !groupAllowed {
		code = kerr.GroupAuthorizationFailed.Code
	}
	for _, t := range denied {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
