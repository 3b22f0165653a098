package broker

// DescribeTransactions: each transactional ID's state, from the transaction coordinator
// (internal/txn).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.DescribeTransactions, 0, 0, (*Broker).handleDescribeTransactions) }

func (b *Broker) handleDescribeTransactions(ctx context.Context, req *kmsg.DescribeTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		// Kafka's handleDescribeTransactionsRequest: DESCRIBE on the transactional ID;
		// the topics of a described transaction are filtered to those with DESCRIBE.
		if !b.authorize(ctx, acl.OpDescribe, acl.ResourceTransactionalID, id) {
			s := kmsg.NewDescribeTransactionsResponseTransactionState()
			s.TransactionalID, s.ErrorCode = id, kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, s)
			continue
		}
		s := b.txns.Describe(id)
		kept := s.Topics[:0]
		for _, t := range s.Topics {
			if b.authorize(ctx, acl.OpDescribe, acl.ResourceTopic, t.Topic) {
				kept = append(kept, t)
			}
		}
		s.Topics = kept
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	return resp
}
