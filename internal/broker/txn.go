package broker

// Transactions: InitProducerId with a transactional ID, AddPartitionsToTxn v0–3,
// AddOffsetsToTxn v0–3, EndTxn v0–3, TxnOffsetCommit v0–3, DescribeTransactions v0,
// ListTransactions v0–1, the transactional produce check and the marker writer, over
// the transaction coordinator of internal/txn (Kafka's KafkaApis transaction handlers).

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/partition"
	"github.com/kmirror/kmirror/internal/record"
	"github.com/kmirror/kmirror/internal/storage"
	"github.com/kmirror/kmirror/internal/txn"
)

// startTxnCoordinator builds the transaction coordinator, elects every partition of
// __transaction_state locally and waits for their load when the topic exists (else
// EnsureTopic creates it on the first transactional request, then elects its
// partitions), and starts its timers.
func (b *Broker) startTxnCoordinator() error {
	n := b.cfg.Int32("transaction.state.log.num.partitions")
	b.txns = txn.New(txn.Options{
		NumPartitions:   n,
		MaxTimeoutMs:    b.cfg.Int32("transaction.max.timeout.ms"),
		IDExpirationMs:  b.cfg.Int64("transactional.id.expiration.ms"),
		AbortIntervalMs: b.cfg.Int64("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
		Log: func(p int32) (txn.StateLog, error) {
			l, err := b.Log(txn.TopicName, p)
			if err != nil {
				return nil, err
			}
			return internalLog{l}, nil
		},
		EnsureTopic: func() error {
			if _, ok := b.meta.Image().Topics[txn.TopicName]; ok {
				return nil
			}
			_, err := b.createTopic(b.ctx, txn.TopicName, metadata.NewTopicID(), n, internalReplicationFactor, map[string]string{
				"cleanup.policy": "compact", "segment.bytes": "104857600",
			}, nil)
			if err != nil {
				return fmt.Errorf("creating %s: %w", txn.TopicName, err)
			}
			return b.electTxnPartitions(n)
		},
		NewProducerID: b.pids.Next,
		Markers:       markerWriter{b},
		Groups:        b.groups,
		Logger:        b.logger.With("component", "transaction-coordinator"),
	})
	if _, exists := b.meta.Image().Topics[txn.TopicName]; exists {
		if err := b.electTxnPartitions(n); err != nil {
			return err
		}
	}
	b.bg.Add(1)
	go func() { defer b.bg.Done(); b.txns.Run(b.ctx) }()
	return nil
}

// electTxnPartitions makes this broker the transaction coordinator of every partition
// of __transaction_state, at the leader epoch of its log (a single node leads them all),
// and waits for the loads (which complete prepared transactions).
func (b *Broker) electTxnPartitions(n int32) error {
	for p := int32(0); p < n; p++ {
		l, err := b.Log(txn.TopicName, p)
		if err != nil {
			return fmt.Errorf("opening %s-%d: %w", txn.TopicName, p, err)
		}
		b.txns.OnElection(p, l.LeaderEpoch())
	}
	if err := b.txns.AwaitLoaded(b.ctx); err != nil {
		return fmt.Errorf("loading transactions: %w", err)
	}
	return nil
}

// markerWriter appends transaction markers to this broker's partition logs (the
// single-node stand-in for WriteTxnMarkers); after a marker lands in a partition of
// __consumer_offsets, the group coordinator applies it to the pending transactional
// offsets (KafkaApis.handleWriteTxnMarkersRequest → onTransactionCompleted).
type markerWriter struct{ b *Broker }

// opWriteMarker is mirror.OpProduce (the broker does not import the mirror package): a
// marker may go where a produce may.
const opWriteMarker = "produce"

func (w markerWriter) WriteMarker(m txn.Marker) error {
	// A mirror topic that is not STOPPED is read-only (spec section 7): its log is a copy
	// of the source's, and a local marker there diverges from it. The local transaction
	// can only be one started before the topic became a mirror (failback), and the cluster
	// it mirrors from ended it at its failover (ABORT marker, section 5). So the
	// partition is dropped from the transaction, as Kafka drops a partition it cannot
	// write a marker to (UNSUPPORTED_FOR_MESSAGE_FORMAT in
	// TransactionMarkerRequestCompletionHandler, no leader in TransactionMarkerChannelManager).
	if ok, msg := w.b.checkMirrorWrite(m.Partition.Topic, m.Partition.Partition, opWriteMarker); !ok {
		w.b.logger.Warn("transaction marker for a mirror topic dropped: the cluster it mirrors from ended the transaction at its failover",
			"topic", m.Partition.Topic, "partition", m.Partition.Partition, "producer.id", m.ProducerID,
			"epoch", m.ProducerEpoch, "commit", m.Commit, "reason", msg)
		return fmt.Errorf("%w: %s", txn.ErrPartitionGone, msg)
	}
	part, err := w.b.Partition(m.Partition.Topic, m.Partition.Partition)
	if errors.Is(err, partition.ErrUnknownTopicOrPartition) {
		return txn.ErrPartitionGone
	}
	if err != nil {
		return err
	}
	typ := record.ControlAbort
	if m.Commit {
		typ = record.ControlCommit
	}
	le := part.LeaderEpoch()
	_, err = part.AppendControlAsLeader(record.BuildEndTxnMarker(typ, m.ProducerID, m.ProducerEpoch, le, m.CoordinatorEpoch, time.Now().UnixMilli()))
	if errors.Is(err, storage.ErrInvalidProducerEpoch) {
		// The partition already knows a newer epoch of this producer: the marker has
		// nothing left to end there.
		w.b.logger.Warn("transaction marker with a stale producer epoch dropped", "topic", m.Partition.Topic, "partition", m.Partition.Partition, "producer.id", m.ProducerID, "epoch", m.ProducerEpoch)
		return nil
	}
	if err == nil && m.Partition.Topic == group.TopicName {
		w.b.groups.CompleteTxn(m.Partition.Partition, m.ProducerID, m.Commit)
	}
	return err
}

// initTransactionalProducerID is InitProducerId with a transactional ID.
func (b *Broker) initTransactionalProducerID(req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) kmsg.Response {
	expPID, expEpoch := int64(-1), int16(-1)
	if req.Version >= 3 {
		expPID, expEpoch = req.ProducerID, req.ProducerEpoch
	}
	pid, epoch, e := b.txns.InitProducerID(*req.TransactionalID, req.TransactionTimeoutMillis, expPID, expEpoch)
	if e != nil {
		resp.ErrorCode = txnErrorCode(e, req.Version, 4)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = pid, epoch
	return resp
}

// txnErrorCode downgrades PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for request
// versions below fencedFrom, as Kafka does for clients that predate KIP-588.
func txnErrorCode(e *kerr.Error, version, fencedFrom int16) int16 {
	if e == kerr.ProducerFenced && version < fencedFrom {
		return kerr.InvalidProducerEpoch.Code
	}
	return e.Code
}

// produceTransactional appends a transactional batch when its partition was added to
// the producer's Ongoing transaction (INVALID_TXN_STATE otherwise, INVALID_PRODUCER_EPOCH
// for a stale epoch).
func (b *Broker) produceTransactional(topic string, partition int32, batch record.Batch, appendFn func()) (*kerr.Error, string) {
	e := b.txns.WithPartition(batch.ProducerID(), batch.ProducerEpoch(), txn.TopicPartition{Topic: topic, Partition: partition}, appendFn)
	if e == kerr.InvalidTxnState {
		return e, "the partition was not added to an ongoing transaction of this producer"
	}
	return e, ""
}

func (b *Broker) handleAddPartitionsToTxn(req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp
	}
	// KafkaApis.handleAddPartitionsToTxnRequest: invalid partitions fail the request,
	// the others get OPERATION_NOT_ATTEMPTED.
	codes := map[txn.TopicPartition]int16{}
	var parts []txn.TopicPartition
	failed := false
	im := b.meta.Image()
	for _, rt := range req.Topics {
		t := im.Topics[rt.Topic]
		for _, p := range rt.Partitions {
			tp := txn.TopicPartition{Topic: rt.Topic, Partition: p}
			parts = append(parts, tp)
			switch {
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
			if c, ok := codes[txn.TopicPartition{Topic: rt.Topic, Partition: p}]; ok {
				sp.ErrorCode = c
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *Broker) handleAddOffsetsToTxn(req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if e := b.txns.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group); e != nil {
		resp.ErrorCode = txnErrorCode(e, req.Version, 2)
	}
	return resp
}

func (b *Broker) handleEndTxn(req *kmsg.EndTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if e := b.txns.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit); e != nil {
		resp.ErrorCode = txnErrorCode(e, req.Version, 2)
	}
	return resp
}

// handleTxnOffsetCommit is served by the group coordinator, which appends the offsets
// to the group's partition of __consumer_offsets as a transactional batch once the
// transaction coordinator has verified that the transaction holds that partition.
func (b *Broker) handleTxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	verify := func(appendFn func()) int16 {
		if e := b.txns.WithTxnOffsetCommit(req.TransactionalID, req.ProducerID, req.ProducerEpoch, b.groups.PartitionFor(req.Group), appendFn); e != nil {
			return e.Code
		}
		return 0
	}
	return b.groups.TxnOffsetCommit(b.ctx, req, verify)
}

func (b *Broker) handleDescribeTransactions(req *kmsg.DescribeTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		resp.TransactionStates = append(resp.TransactionStates, b.txns.Describe(id))
	}
	return resp
}

func (b *Broker) handleListTransactions(req *kmsg.ListTransactionsRequest) kmsg.Response {
	return b.txns.List(req, nowMs())
}
