package broker

// EndTxn: a transaction committed or aborted by the transaction coordinator
// (internal/txn), which writes its markers (txn.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() {
	// v5 is KIP-890 part 2.
	register(kmsg.EndTxn, 0, 3, (*Broker).handleEndTxn)
}

func (b *Broker) handleEndTxn(ctx context.Context, req *kmsg.EndTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if !b.authorize(ctx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) { // Kafka: WRITE on the transactional ID
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp
	}
	if e := b.txns.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit); e != nil {
		resp.ErrorCode = txnErrorCode(e, req.Version, 2)
	}
	return resp
}
