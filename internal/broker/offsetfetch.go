package broker

// OffsetFetch, served by the group coordinator (internal/group). Authorization as Kafka's
// handleOffsetFetchRequest: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED) and
// DESCRIBE on each topic: a named topic without it is TOPIC_AUTHORIZATION_FAILED, and an
// all-topics request leaves it out.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.OffsetFetch, 1, 9, (*Broker).handleOffsetFetch) }

func (b *Broker) handleOffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := b.groups.OffsetFetch(ctx, req)
	if b.authorization.authz == nil {
		return resp
	}
	topicDenied := func(t string) bool { return !b.authorize(ctx, acl.OpDescribe, acl.ResourceTopic, t) }
	if req.Version >= 8 {
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if !b.authorize(ctx, acl.OpDescribe, acl.ResourceGroup, g.Group) {
				g.ErrorCode, g.Topics = kerr.GroupAuthorizationFailed.Code, nil
				continue
			}
			named := i < len(req.Groups) && req.Groups[i].Topics != nil
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				if topicDenied(t.Topic) {
					if !named {
						continue
					}
					for j := range t.Partitions {
						p := &t.Partitions[j]
						p.Offset, p.LeaderEpoch, p.ErrorCode = -1, -1, kerr.TopicAuthorizationFailed.Code
					}
				}
				kept = append(kept, t)
			}
			g.Topics = kept
		}
		return resp
	}
	groupDenied := !b.authorize(ctx, acl.OpDescribe, acl.ResourceGroup, req.Group)
	if groupDenied && req.Version >= 2 {
		resp.ErrorCode, resp.Topics = kerr.GroupAuthorizationFailed.Code, nil
		return resp
	}
	kept := resp.Topics[:0]
	for _, t := range resp.Topics {
		if groupDenied || topicDenied(t.Topic) {
			if req.Topics == nil {
				continue
			}
			code := kerr.TopicAuthorizationFailed.Code
			if groupDenied {
				code = kerr.GroupAuthorizationFailed.Code
			}
			for j := range t.Partitions {
				p := &t.Partitions[j]
				p.Offset, p.LeaderEpoch, p.ErrorCode = -1, -1, code
			}
		}
		kept = append(kept, t)
	}
	resp.Topics = kept
	return resp
}
