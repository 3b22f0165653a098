package broker

// ListTransactions, answered by the transaction coordinator (internal/txn) from the
// partitions of __transaction_state this broker leads.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ListTransactions, 0, 1, (*Broker).handleListTransactions) }

func (b *Broker) handleListTransactions(_ context.Context, req *kmsg.ListTransactionsRequest) kmsg.Response {
	return b.txns.List(req, nowMs())
}
