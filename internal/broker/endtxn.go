package broker

// EndTxn: a transaction committed or aborted by the transaction coordinator
// (internal/txn), which writes its markers (txn.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	// v5 is KIP-890 part 2.
	register(kmsg.EndTxn, 0, 3, (*Broker).handleEndTxn)
}

func (b *Broker) handleEndTxn(_ context.Context, req *kmsg.EndTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if e := b.txns.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit); e != nil {
		resp.ErrorCode = txnErrorCode(e, req.Version, 2)
	}
	return resp
}
