package broker

// AddPartitionsToTxn: the client form adds partitions to a transaction; the broker form
// (inter-broker, VerifyOnly) checks that transactions hold partitions, as txn.go's
// verifyTxn asks a coordinator on another broker.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/kafka"
)

func init() {
	// v0–3: the client form; v4+: the batched broker form (verification, inter-broker).
	register(kmsg.AddPartitionsToTxn, 0, 4, (*Broker).handleAddPartitionsToTxn)
}

func (b *Broker) handleAddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		// Kafka: the broker form needs CLUSTER_ACTION on the cluster.
		if !b.authorizeCluster(ctx, acl.OpClusterAction) {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp
		}
		return b.verifyPartitionsInTxn(req, resp)
	}
	// Kafka's handleAddPartitionsToTxnRequest: WRITE on the transactional ID (else every
	// partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each topic
	// (else TOPIC_AUTHORIZATION_FAILED, the other partitions OPERATION_NOT_ATTEMPTED).
	txnAllowed := b.authorize(ctx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID)
	// KafkaApis.handleAddPartitionsToTxnRequest: invalid partitions fail the request,
	// the others get OPERATION_NOT_ATTEMPTED.
	codes := map[kafka.TopicPartition]int16{}
	var parts []kafka.TopicPartition
	failed := false
	im := b.meta.Image()
	for _, rt := range req.Topics {
		t := im.Topics[rt.Topic]
		topicAllowed := txnAllowed && b.authorize(ctx, acl.OpWrite, acl.ResourceTopic, rt.Topic)
		for _, p := range rt.Partitions {
			tp := kafka.TopicPartition{Topic: rt.Topic, Partition: p}
			parts = append(parts, tp)
			switch {
			case !txnAllowed:
				codes[tp], failed = kerr.TransactionalIDAuthorizationFailed.Code, true
			case !topicAllowed:
				codes[tp], failed = kerr.TopicAuthorizationFailed.Code, true
			case t == nil || p < 0 || p >= t.Partitions:
				codes[tp], failed = kerr.UnknownTopicOrPartition.Code, true
			case isInternalTopic(rt.Topic):
				codes[tp], failed = kerr.InvalidTopicException.Code, true
			default:
				if ok, msg := b.checkMirrorWrite(rt.Topic, p, "add_partitions_to_txn"); !ok {
					b.logger.Info("AddPartitionsToTxn refused", "topic", rt.Topic, "partition", p, "reason", msg)
					codes[tp], failed = kerr.PolicyViolation.Code, true
				}
			}
		}
	}
	code := int16(0)
	if failed {
		code = kerr.OperationNotAttempted.Code
	} else if e := b.txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts); e != nil {
		code = txnErrorCode(e, req.Version, 2)
	}
	for _, rt := range req.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, code
			if c, ok := codes[kafka.TopicPartition{Topic: rt.Topic, Partition: p}]; ok {
				sp.ErrorCode = c
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// verifyPartitionsInTxn serves the broker form of AddPartitionsToTxn (v4, VerifyOnly
// set): whether each transaction holds the partitions and is ongoing, per partition
// (INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH, NOT_COORDINATOR, ...). Adding partitions
// this way (KIP-890 part 2) is not served: INVALID_REQUEST.
func (b *Broker) verifyPartitionsInTxn(req *kmsg.AddPartitionsToTxnRequest, resp *kmsg.AddPartitionsToTxnResponse) kmsg.Response {
	for _, tx := range req.Transactions {
		res := kmsg.NewAddPartitionsToTxnResponseTransaction()
		res.TransactionalID = tx.TransactionalID
		for _, tt := range tx.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = tt.Topic
			for _, p := range tt.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition = p
				tp := kafka.TopicPartition{Topic: tt.Topic, Partition: p}
				var e *kerr.Error
				switch {
				case !tx.VerifyOnly:
					e = kerr.InvalidRequest
				case tt.Topic == group.TopicName:
					e = b.txns.WithTxnOffsetCommit(tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, p, func() {})
				default:
					e = b.txns.WithPartition(tx.ProducerID, tx.ProducerEpoch, tp, func() {})
				}
				if e != nil {
					rp.ErrorCode = e.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			res.Topics = append(res.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, res)
	}
	return resp
}
