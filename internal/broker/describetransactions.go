package broker

// DescribeTransactions: each transactional ID's state, from the transaction coordinator
// (internal/txn).

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDescribeTransactions(req *kmsg.DescribeTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		resp.TransactionStates = append(resp.TransactionStates, b.txns.Describe(id))
	}
	return resp
}
