package broker

// FindCoordinator (Kafka's KafkaApis.handleFindCoordinatorRequest): the leader of the
// group's partition of __consumer_offsets or of the transactional ID's partition of
// __transaction_state, the internal topic created first when missing.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/txn"
)

func init() {
	// v4: batched keys.
	register(kmsg.FindCoordinator, 0, 4, (*Broker).handleFindCoordinator)
}

// handleFindCoordinator answers the leader of the coordinator's partition: of
// __consumer_offsets for a group (abs(Java hashCode) % offsets.topic.num.partitions), of
// __transaction_state for a transactional ID, with its endpoint on the request's
// listener; COORDINATOR_NOT_AVAILABLE while that partition has no leader (or, for
// transactions, before __transaction_state exists).
func (b *Broker) handleFindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	listener := b.listenerOf(ctx)
	for _, k := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = k
		c.NodeID = -1
		switch {
		case req.CoordinatorType > 1:
			// No share coordinator.
			c.ErrorCode = kerr.InvalidRequest.Code
			c.ErrorMessage = strp("kmirror coordinates groups and transactions only")
		case k == "":
			c.ErrorCode = kerr.InvalidRequest.Code
		// Kafka's getCoordinator: DESCRIBE on the group or the transactional ID.
		case req.CoordinatorType == 0 && !b.authorize(ctx, acl.OpDescribe, acl.ResourceGroup, k):
			c.ErrorCode = kerr.GroupAuthorizationFailed.Code
		case req.CoordinatorType == 1 && !b.authorize(ctx, acl.OpDescribe, acl.ResourceTransactionalID, k):
			c.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case req.CoordinatorType == 1 && b.txns.EnsureTopic() != nil, req.CoordinatorType == 0 && b.ensureOffsetsTopic() != nil:
			// Kafka answers COORDINATOR_NOT_AVAILABLE until the topic exists.
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		default:
			topic, p := OffsetsTopic, b.groups.PartitionFor(k)
			if req.CoordinatorType == 1 {
				topic, p = txn.TopicName, txn.PartitionFor(k, b.internalPartitions(txn.TopicName))
			}
			leader, _ := b.currentLeader(topic, p)
			e, ok := b.endpointOf(b.rm.Image(), leader, listener)
			if !ok {
				c.ErrorCode = kerr.CoordinatorNotAvailable.Code
				break
			}
			c.NodeID, c.Host, c.Port = leader, e.Host, e.Port
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		resp.Coordinators = nil
	}
	return resp
}
