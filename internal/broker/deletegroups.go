package broker

// DeleteGroups, served by the group coordinator (internal/group). Authorization as
// Kafka's handleDeleteGroupsRequest: a group without DELETE is GROUP_AUTHORIZATION_FAILED
// and not deleted.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.DeleteGroups, 0, 2, (*Broker).handleDeleteGroups) }

func (b *Broker) handleDeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	var allowed, denied []string
	for _, g := range req.Groups {
		if b.authorize(ctx, acl.OpDelete, acl.ResourceGroup, g) {
			allowed = append(allowed, g)
		} else {
			denied = append(denied, g)
		}
	}
	if len(denied) == 0 {
		return b.groups.DeleteGroups(ctx, req)
	}
	sub := *req
	sub.Groups = allowed
	resp := b.groups.DeleteGroups(ctx, &sub)
	for _, g := range denied {
		r := kmsg.NewDeleteGroupsResponseGroup()
		r.Group, r.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, r)
	}
	return resp
}
