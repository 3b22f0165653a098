package broker

// AddOffsetsToTxn: a group's partition of __consumer_offsets added to a transaction by
// the transaction coordinator (internal/txn).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.AddOffsetsToTxn, 0, 3, (*Broker).handleAddOffsetsToTxn) }

func (b *Broker) handleAddOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	// Kafka's handleAddOffsetsToTxnRequest: WRITE on the transactional ID, READ on the group.
	switch {
	case !b.authorize(ctx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp
	case !b.authorize(ctx, acl.OpRead, acl.ResourceGroup, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp
	}
	if e := b.txns.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group); e != nil {
		resp.ErrorCode = txnErrorCode(e, req.Version, 2)
	}
	return resp
}
