package broker

// ListTransactions, answered by the transaction coordinator (internal/txn) from the
// partitions of __transaction_state this broker leads.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleListTransactions(req *kmsg.ListTransactionsRequest) kmsg.Response {
	return b.txns.List(req, nowMs())
}
