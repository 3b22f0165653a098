package broker

// AddOffsetsToTxn: a group's partition of __consumer_offsets added to a transaction by
// the transaction coordinator (internal/txn).

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleAddOffsetsToTxn(req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if e := b.txns.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group); e != nil {
		resp.ErrorCode = txnErrorCode(e, req.Version, 2)
	}
	return resp
}
