package broker

// Transactions: the transaction coordinator of internal/txn and what the broker does for
// it, the transactional produce check (verification) and the marker writer (Kafka's
// KafkaApis transaction handlers). The transaction APIs have a file each:
// initproducerid.go, addpartitionstotxn.go, addoffsetstotxn.go, endtxn.go,
// txnoffsetcommit.go, writetxnmarkers.go, describetransactions.go, listtransactions.go.

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"context"
	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/partition"
	"github.com/kmirror/kmirror/internal/record"
	"github.com/kmirror/kmirror/internal/storage"
	"github.com/kmirror/kmirror/internal/txn"
)

// startTxnCoordinator builds the transaction coordinator over the partitions of
// __transaction_state this broker leads (the topic is created on the first transactional
// request, EnsureTopic) and starts its timers. A one-node cluster leads every partition:
// it waits for them to be loaded (which completes prepared transactions).
func (b *Broker) startTxnCoordinator() error {
	n := b.internalPartitions(txn.TopicName)
	txns := txn.New(txn.Options{
		NumPartitions:   n,
		MaxTimeoutMs:    b.cfg.Int32("transaction.max.timeout.ms"),
		IDExpirationMs:  b.cfg.Int64("transactional.id.expiration.ms"),
		AbortIntervalMs: b.cfg.Int64("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
		Log: func(p int32) (txn.StateLog, error) {
			part, err := b.leader(txn.TopicName, p)
			if err != nil {
				return nil, err
			}
			return internalLog{part}, nil
		},
		EnsureTopic: func() error {
			// Kafka's TransactionLog topic configs
			return b.ensureInternalTopic(txn.TopicName, n, map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600",
				"min.insync.replicas": strconv.Itoa(int(b.cfg.Int32("transaction.state.log.min.isr")))})
		},
		NewProducerID: b.pids.Next,
		Markers:       markerWriter{b},
		Groups:        b.groups,
		Logger:        b.logger.With("component", "transaction-coordinator"),
	})
	if err := b.awaitAllLed(txn.TopicName); err != nil {
		return err
	}
	b.coordMu.Lock()
	b.txns = txns
	b.electLedCoordinators(txn.TopicName)
	b.coordMu.Unlock()
	if b.node.Legacy {
		if err := b.txns.AwaitLoaded(b.ctx); err != nil {
			return fmt.Errorf("loading transactions: %w", err)
		}
	}
	b.goBackground(func() { b.txns.Run(b.ctx) })
	return nil
}

// markerWriter writes transaction markers: to the partitions this broker leads directly,
// to the others' leaders as WriteTxnMarkers; after a marker lands in a partition of
// __consumer_offsets, the group coordinator applies it to the pending transactional
// offsets (KafkaApis.handleWriteTxnMarkersRequest → onTransactionCompleted).
type markerWriter struct{ b *Broker }

// opWriteMarker is mirror.OpProduce (the broker does not import the mirror package): a
// marker may go where a produce may.
const opWriteMarker = "produce"

func (w markerWriter) WriteMarker(m txn.Marker) error {
	b := w.b
	if _, err := b.leader(m.Partition.Topic, m.Partition.Partition); errors.Is(err, partition.ErrNotLeader) {
		if leader, _ := b.currentLeader(m.Partition.Topic, m.Partition.Partition); leader >= 0 && leader != b.nodeID {
			return b.sendMarker(leader, m)
		}
	}
	return b.appendMarker(m)
}

// appendMarker writes a transaction marker to a partition this broker leads (waiting
// briefly for a leadership the image is about to give it). A mirror topic that is not
// STOPPED is read-only (spec section 7): its log is a copy of the source's, and a local
// marker there diverges from it. The local transaction can only be one started before the
// topic became a mirror (failback), and the cluster it mirrors from ended it at its
// failover (ABORT marker, section 5). So the partition is dropped from the transaction,
// as Kafka drops a partition it cannot write a marker to (UNSUPPORTED_FOR_MESSAGE_FORMAT
// in TransactionMarkerRequestCompletionHandler, no leader in
// TransactionMarkerChannelManager). After a marker lands in a partition of
// __consumer_offsets, the group coordinator applies it to the pending transactional
// offsets (KafkaApis.handleWriteTxnMarkersRequest → onTransactionCompleted).
func (b *Broker) appendMarker(m txn.Marker) error {
	if ok, msg := b.checkMirrorWrite(m.Partition.Topic, m.Partition.Partition, opWriteMarker); !ok {
		b.logger.Warn("transaction marker for a mirror topic dropped: the cluster it mirrors from ended the transaction at its failover",
			"topic", m.Partition.Topic, "partition", m.Partition.Partition, "producer.id", m.ProducerID,
			"epoch", m.ProducerEpoch, "commit", m.Commit, "reason", msg)
		return fmt.Errorf("%w: %s", txn.ErrPartitionGone, msg)
	}
	part, err := b.Partition(m.Partition.Topic, m.Partition.Partition)
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
	ctx, cancel := context.WithTimeout(b.ctx, internalWriteTimeout)
	defer cancel()
	_, err = part.AppendControlAsLeader(ctx, record.BuildEndTxnMarker(typ, m.ProducerID, m.ProducerEpoch, le, m.CoordinatorEpoch, time.Now().UnixMilli()))
	if errors.Is(err, storage.ErrInvalidProducerEpoch) {
		// The partition already knows a newer epoch of this producer: the marker has
		// nothing left to end there.
		b.logger.Warn("transaction marker with a stale producer epoch dropped", "topic", m.Partition.Topic, "partition", m.Partition.Partition, "producer.id", m.ProducerID, "epoch", m.ProducerEpoch)
		return nil
	}
	if err == nil && m.Partition.Topic == group.TopicName {
		b.groups.CompleteTxn(m.Partition.Partition, m.ProducerID, m.Commit)
	}
	return err
}

// sendMarker writes a marker to a partition another broker leads, with WriteTxnMarkers
// (Kafka's TransactionMarkerChannelManager). A partition the leader no longer has, or a
// read-only mirror partition, is gone for the transaction; other errors are retried by
// the coordinator.
func (b *Broker) sendMarker(leader int32, m txn.Marker) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	wm := kmsg.NewWriteTxnMarkersRequestMarker()
	wm.ProducerID, wm.ProducerEpoch, wm.Committed, wm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	wt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	wt.Topic, wt.Partitions = m.Partition.Topic, []int32{m.Partition.Partition}
	wm.Topics = append(wm.Topics, wt)
	req.Markers = append(req.Markers, wm)
	resp, err := b.peers.request(b.ctx, leader, req)
	if err != nil {
		return fmt.Errorf("WriteTxnMarkers to broker %d: %w", leader, err)
	}
	for _, rm := range resp.(*kmsg.WriteTxnMarkersResponse).Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				switch rp.ErrorCode {
				case 0:
				case kerr.UnknownTopicOrPartition.Code, kerr.PolicyViolation.Code:
					return txn.ErrPartitionGone
				default:
					return fmt.Errorf("WriteTxnMarkers to broker %d: %w", leader, kerr.ErrorForCode(rp.ErrorCode))
				}
			}
		}
	}
	return nil
}

// verifyTxn runs appendFn while the transaction of producer pid/epoch, coordinated by
// the coordinator of transactional ID id, holds tp and is ongoing (Kafka 3.6+'s
// transaction verification). A coordinator on another broker is asked with
// AddPartitionsToTxn v4 VerifyOnly first; errors are the coordinator's Kafka errors.
func (b *Broker) verifyTxn(id string, pid int64, epoch int16, tp kafka.TopicPartition, appendFn func()) *kerr.Error {
	n := b.internalPartitions(txn.TopicName)
	coord, _ := b.currentLeader(txn.TopicName, txn.PartitionFor(id, n))
	if coord < 0 && id != "" {
		// No known coordinator (its node is down, or this broker's image does not show
		// the partition yet): this broker's own coordinator does not hold the
		// transaction, and INVALID_TXN_STATE would be fatal to the producer. Kafka's
		// AddPartitionsToTxnManager answers COORDINATOR_NOT_AVAILABLE, sent to producers
		// as NOT_ENOUGH_REPLICAS: retriable.
		return kerr.NotEnoughReplicas
	}
	if coord == b.nodeID || id == "" {
		if tp.Topic == group.TopicName {
			return b.txns.WithTxnOffsetCommit(id, pid, epoch, tp.Partition, appendFn)
		}
		return b.txns.WithPartition(pid, epoch, tp, appendFn)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
	tx.Topics = append(tx.Topics, tt)
	req.Transactions = append(req.Transactions, tx)
	resp, err := b.peers.request(b.ctx, coord, req)
	if err != nil {
		return kerr.NotEnoughReplicas // retriable for the producer, as Kafka answers an unreachable coordinator
	}
	r := resp.(*kmsg.AddPartitionsToTxnResponse)
	if r.ErrorCode != 0 {
		return kerr.ErrorForCode(r.ErrorCode).(*kerr.Error)
	}
	for _, res := range r.Transactions {
		for _, rt := range res.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					return kerr.ErrorForCode(rp.ErrorCode).(*kerr.Error)
				}
			}
		}
	}
	appendFn()
	return nil
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
func (b *Broker) produceTransactional(transactionalID string, topic string, partition int32, batch record.Batch, appendFn func()) (*kerr.Error, string) {
	e := b.verifyTxn(transactionalID, batch.ProducerID(), batch.ProducerEpoch(), kafka.TopicPartition{Topic: topic, Partition: partition}, appendFn)
	if e == kerr.InvalidTxnState {
		return e, "the partition was not added to an ongoing transaction of this producer"
	}
	return e, ""
}
