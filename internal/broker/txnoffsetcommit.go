package broker

// TxnOffsetCommit, served by the group coordinator (internal/group) once the transaction
// is verified (txn.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/kafka"
)

func init() {
	// v5 is KIP-890 part 2.
	register(kmsg.TxnOffsetCommit, 0, 3, (*Broker).handleTxnOffsetCommit)
}

// handleTxnOffsetCommit is served by the group coordinator, which appends the offsets
// to the group's partition of __consumer_offsets as a transactional batch once the
// transaction coordinator has verified that the transaction holds that partition.
//
// Authorization as Kafka's handleTxnOffsetCommitRequest: WRITE on the transactional ID
// (else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group
// (GROUP_AUTHORIZATION_FAILED) and READ on each topic (TOPIC_AUTHORIZATION_FAILED).
func (b *Broker) handleTxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	var code int16
	switch {
	case !b.authorize(ctx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		code = kerr.TransactionalIDAuthorizationFailed.Code
	case !b.authorize(ctx, acl.OpRead, acl.ResourceGroup, req.Group):
		code = kerr.GroupAuthorizationFailed.Code
	}
	var allowed, denied []kmsg.TxnOffsetCommitRequestTopic
	for _, t := range req.Topics {
		if code == 0 && b.authorize(ctx, acl.OpRead, acl.ResourceTopic, t.Topic) {
			allowed = append(allowed, t)
		} else {
			denied = append(denied, t)
		}
	}
	if code == 0 {
		code = kerr.TopicAuthorizationFailed.Code
	}
	if len(denied) == 0 {
		return b.txnOffsetCommit(req)
	}
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	if len(allowed) > 0 {
		sub := *req
		sub.Topics = allowed
		resp = b.txnOffsetCommit(&sub).(*kmsg.TxnOffsetCommitResponse)
	}
	for _, t := range denied {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (b *Broker) txnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	verify := func(appendFn func()) int16 {
		tp := kafka.TopicPartition{Topic: group.TopicName, Partition: b.groups.PartitionFor(req.Group)}
		if e := b.verifyTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, tp, appendFn); e != nil {
			return e.Code
		}
		return 0
	}
	return b.groups.TxnOffsetCommit(b.ctx, req, verify)
}
