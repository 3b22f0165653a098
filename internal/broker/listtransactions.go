package broker

// ListTransactions, answered by the transaction coordinator (internal/txn) from the
// partitions of __transaction_state this broker leads.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.ListTransactions, 0, 1, (*Broker).handleListTransactions) }

func (b *Broker) handleListTransactions(ctx context.Context, req *kmsg.ListTransactionsRequest) kmsg.Response {
	resp := b.txns.List(req, nowMs())
	// Kafka's handleListTransactionsRequest: only the transactional IDs with DESCRIBE.
	kept := resp.TransactionStates[:0]
	for _, s := range resp.TransactionStates {
		if b.authorize(ctx, acl.OpDescribe, acl.ResourceTransactionalID, s.TransactionalID) {
			kept = append(kept, s)
		}
	}
	resp.TransactionStates = kept
	return resp
}
