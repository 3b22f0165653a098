package broker

// JoinGroup, served by the group coordinator (internal/group) with the member's client ID
// and host, which DescribeGroups reports.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/wire"
)

// JoinGroup reads the request header (the client ID) and the connection's address: it is
// registered with the wire request.
func init() { brokerAPIs.add(kmsg.JoinGroup, 0, 9, (*Broker).handleJoinGroup) }

func (b *Broker) handleJoinGroup(ctx context.Context, req *wire.Request) kmsg.Response {
	if jg := req.Body.(*kmsg.JoinGroupRequest); !b.authorize(ctx, acl.OpRead, acl.ResourceGroup, jg.Group) {
		return refuse(jg.ResponseKind(), kerr.GroupAuthorizationFailed) // Kafka: READ on the group
	}
	return b.groups.JoinGroup(group.WithClient(ctx, req.Header.ClientID, "/"+hostOf(req.Remote)), req.Body.(*kmsg.JoinGroupRequest))
}
