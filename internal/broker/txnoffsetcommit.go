package broker

// TxnOffsetCommit, served by the group coordinator (internal/group) once the transaction
// is verified (txn.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

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
func (b *Broker) handleTxnOffsetCommit(_ context.Context, req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	verify := func(appendFn func()) int16 {
		tp := kafka.TopicPartition{Topic: group.TopicName, Partition: b.groups.PartitionFor(req.Group)}
		if e := b.verifyTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, tp, appendFn); e != nil {
			return e.Code
		}
		return 0
	}
	return b.groups.TxnOffsetCommit(b.ctx, req, verify)
}
