package broker

// AddOffsetsToTxn: a group's partition of __consumer_offsets added to a transaction by
// the transaction coordinator (internal/txn).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.AddOffsetsToTxn, 0, 3, (*Broker).handleAddOffsetsToTxn) }

func (b *Broker) handleAddOffsetsToTxn(_ context.Context, req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if e := b.txns.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group); e != nil {
		resp.ErrorCode = txnErrorCode(e, req.Version, 2)
	}
	return resp
}
