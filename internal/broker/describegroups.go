package broker

// DescribeGroups, served by the group coordinator (internal/group). Authorization as
// Kafka's handleDescribeGroupsRequest: a group without DESCRIBE is answered
// GROUP_AUTHORIZATION_FAILED with nothing else; AuthorizedOperations, when asked, holds
// the caller's operations on the group.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.DescribeGroups, 0, 5, (*Broker).handleDescribeGroups) }

func (b *Broker) handleDescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := b.groups.DescribeGroups(ctx, req)
	if b.authorization.authz == nil {
		return resp
	}
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if !b.authorize(ctx, acl.OpDescribe, acl.ResourceGroup, g.Group) {
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
			*g = d
			continue
		}
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = b.authorizedOperations(ctx, acl.ResourceGroup, g.Group)
		}
	}
	return resp
}
