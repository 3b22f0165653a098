package broker

// DeleteTopics, by name or by topic ID: internal topics cannot be deleted, nor mirror
// topics that refuse client writes (POLICY_VIOLATION, spec §10).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/metadata"
)

func init() { register(kmsg.DeleteTopics, 1, 6, (*Broker).handleDeleteTopics) }

func (b *Broker) handleDeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	for _, n := range req.TopicNames {
		targets = append(targets, target{name: strp(n)})
	}
	for _, t := range req.Topics {
		targets = append(targets, target{name: t.Topic, id: t.TopicID})
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		im := b.meta.Image()
		var t *metadata.Topic
		if tg.name != nil {
			t = im.Topics[*tg.name]
		} else {
			t = im.TopicsByID[tg.id]
		}
		switch {
		// Kafka's handleDeleteTopicsRequest: DELETE on the topic (a topic ID whose
		// topic is not known resolves to no name and is UNKNOWN_TOPIC_ID).
		case (t != nil || tg.name != nil) && !b.authorize(ctx, acl.OpDelete, acl.ResourceTopic, nameOr(t, tg.name)):
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case t == nil && tg.name == nil:
			st.ErrorCode = kerr.UnknownTopicID.Code
		case t == nil:
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case isInternalTopic(t.Name):
			st.ErrorCode = kerr.TopicDeletionDisabled.Code
			st.ErrorMessage = strp("internal topics cannot be deleted")
		default:
			st.Topic, st.TopicID = strp(t.Name), t.ID
			if ok, msg := b.checkMirrorWrite(t.Name, -1, "delete topics"); !ok {
				st.ErrorCode = kerr.PolicyViolation.Code
				st.ErrorMessage = strp(msg)
				break
			}
			if _, err := b.meta.Apply(ctx, &metadata.RemoveTopicRecord{ID: t.ID}); err != nil {
				st.ErrorCode = kerr.UnknownServerError.Code
				st.ErrorMessage = strp(err.Error())
				break
			}
			b.applyNow()
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// nameOr is t's name, else *name.
func nameOr(t *metadata.Topic, name *string) string {
	if t != nil {
		return t.Name
	}
	return *name
}
