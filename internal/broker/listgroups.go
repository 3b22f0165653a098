package broker

// ListGroups, served by the group coordinator (internal/group). Authorization as Kafka's
// handleListGroupsRequest: DESCRIBE on the cluster lists every group, else only the
// groups with DESCRIBE.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.ListGroups, 0, 5, (*Broker).handleListGroups) }

func (b *Broker) handleListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := b.groups.ListGroups(ctx, req)
	if b.authorizeCluster(ctx, acl.OpDescribe) {
		return resp
	}
	kept := resp.Groups[:0]
	for _, g := range resp.Groups {
		if b.authorize(ctx, acl.OpDescribe, acl.ResourceGroup, g.Group) {
			kept = append(kept, g)
		}
	}
	resp.Groups = kept
	return resp
}
