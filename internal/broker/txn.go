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
			return b.ensureInternalTopic(txn.TopicName, n, map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"})
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

// markerWriter appends transaction markers to this broker's partition logs (the
// single-node stand-in for WriteTxnMarkers); after a marker lands in a partition of
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
	_, err = part.AppendControlAsLeader(record.BuildEndTxnMarker(typ, m.ProducerID, m.ProducerEpoch, le, m.CoordinatorEpoch, time.Now().UnixMilli()))
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

// handleWriteTxnMarkers writes the markers a transaction coordinator on another broker
// sends (WriteTxnMarkers v0–1, inter-broker): per partition NOT_LEADER_OR_FOLLOWER when
// this broker does not lead it, UNKNOWN_TOPIC_OR_PARTITION when it is gone or read-only.
func (b *Broker) handleWriteTxnMarkers(req *kmsg.WriteTxnMarkersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, wm := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = wm.ProducerID
		for _, wt := range wm.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = wt.Topic
			for _, p := range wt.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				m := txn.Marker{ProducerID: wm.ProducerID, ProducerEpoch: wm.ProducerEpoch, CoordinatorEpoch: wm.CoordinatorEpoch,
					Commit: wm.Committed, Partition: kafka.TopicPartition{Topic: wt.Topic, Partition: p}}
				if _, err := b.leader(wt.Topic, p); err != nil {
					rp.ErrorCode = partitionError(err).Code
				} else if err := b.appendMarker(m); errors.Is(err, txn.ErrPartitionGone) {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				} else if err != nil {
					rp.ErrorCode = appendErrorCode(err).Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

// verifyTxn runs appendFn while the transaction of producer pid/epoch, coordinated by
// the coordinator of transactional ID id, holds tp and is ongoing (Kafka 3.6+'s
// transaction verification). A coordinator on another broker is asked with
// AddPartitionsToTxn v4 VerifyOnly first; errors are the coordinator's Kafka errors.
func (b *Broker) verifyTxn(id string, pid int64, epoch int16, tp kafka.TopicPartition, appendFn func()) *kerr.Error {
	n := b.internalPartitions(txn.TopicName)
	coord, _ := b.currentLeader(txn.TopicName, txn.PartitionFor(id, n))
	if coord == b.nodeID || coord < 0 || id == "" {
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
func (b *Broker) produceTransactional(transactionalID string, topic string, partition int32, batch record.Batch, appendFn func()) (*kerr.Error, string) {
	e := b.verifyTxn(transactionalID, batch.ProducerID(), batch.ProducerEpoch(), kafka.TopicPartition{Topic: topic, Partition: partition}, appendFn)
	if e == kerr.InvalidTxnState {
		return e, "the partition was not added to an ongoing transaction of this producer"
	}
	return e, ""
}

func (b *Broker) handleAddPartitionsToTxn(req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		return b.verifyPartitionsInTxn(req, resp)
	}
	// KafkaApis.handleAddPartitionsToTxnRequest: invalid partitions fail the request,
	// the others get OPERATION_NOT_ATTEMPTED.
	codes := map[kafka.TopicPartition]int16{}
	var parts []kafka.TopicPartition
	failed := false
	im := b.meta.Image()
	for _, rt := range req.Topics {
		t := im.Topics[rt.Topic]
		for _, p := range rt.Partitions {
			tp := kafka.TopicPartition{Topic: rt.Topic, Partition: p}
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
		tp := kafka.TopicPartition{Topic: group.TopicName, Partition: b.groups.PartitionFor(req.Group)}
		if e := b.verifyTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, tp, appendFn); e != nil {
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
