package broker

// InitProducerId: a producer ID and epoch for an idempotent producer (from this broker's
// block of producer IDs, state.go; KIP-360 epoch bumps) or, with a transactional ID, from
// the transaction coordinator (internal/txn).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.InitProducerID, 0, 5, (*Broker).handleInitProducerID) }

func (b *Broker) handleInitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	// Kafka's handleInitProducerIdRequest: WRITE on the transactional ID; an idempotent
	// producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
	switch {
	case req.TransactionalID != nil && !b.authorize(ctx, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp
	case req.TransactionalID == nil && !b.authorizeCluster(ctx, acl.OpIdempotentWrite) && !b.authorizeByResourceType(ctx, acl.OpWrite, acl.ResourceTopic):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	if req.TransactionalID != nil {
		return b.initTransactionalProducerID(req, resp)
	}
	if req.ProducerID >= 0 && req.ProducerEpoch >= 0 {
		// KIP-360: an idempotent producer bumping its epoch. Epoch overflow gets a
		// new ID, as Kafka's ProducerIdManager does.
		if req.ProducerEpoch < 32766 {
			resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
			return resp
		}
	}
	id, err := b.pids.Next()
	if err != nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}

// initTransactionalProducerID is InitProducerId with a transactional ID.
func (b *Broker) initTransactionalProducerID(req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) kmsg.Response {
	expPID, expEpoch := int64(-1), int16(-1)
	if req.Version >= 3 {
		expPID, expEpoch = req.ProducerID, req.ProducerEpoch
	}
	pid, epoch, e := b.txns.InitProducerID(*req.TransactionalID, req.TransactionTimeoutMillis, expPID, expEpoch)
	if e != nil {
		resp.ErrorCode = txnErrorCode(e, req.Version, 4)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = pid, epoch
	return resp
}
