package txn

import (
	"errors"
	"maps"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/kafka"
)

func nowMs() int64 { return time.Now().UnixMilli() }

// transitLocked applies mutate to t and appends the result to the transaction log;
// when the append fails t is restored (Kafka's prepareTransitionTo + completeTransitionTo
// / abortPendingTransition). The producer ID index follows a changed producer ID. The
// caller holds t.mu.
func (c *Coordinator) transitLocked(t *txnMetadata, mutate func()) error {
	saved := t.txnFields
	saved.partitions = maps.Clone(t.partitions)
	mutate()
	t.lastUpdateMs = nowMs()
	if err := c.writeLocked(t); err != nil {
		t.txnFields = saved
		return err
	}
	if saved.producerID != t.producerID {
		c.mu.Lock()
		if c.byPID[saved.producerID] == t {
			delete(c.byPID, saved.producerID)
		}
		if !t.unloaded.Load() {
			c.byPID[t.producerID] = t
		}
		c.mu.Unlock()
	}
	return nil
}

// getOrCreate returns the live metadata of id, creating it Empty with a new producer ID
// and epoch −1 (not yet logged) when absent (TransactionStateManager
// .putTransactionStateIfNotExists). The result is returned locked. Errors:
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE (no producer
// ID).
func (c *Coordinator) getOrCreate(id string, timeoutMs int32) (*txnMetadata, *kerr.Error) {
	for {
		c.mu.Lock()
		part, e := c.partitionLocked(PartitionFor(id, c.opts.NumPartitions))
		if e != nil {
			c.mu.Unlock()
			return nil, e
		}
		t := part.txns[id]
		if t == nil {
			pid, err := c.opts.NewProducerID()
			if err != nil {
				c.mu.Unlock()
				c.log.Warn("allocating a producer ID", "err", err)
				return nil, kerr.CoordinatorNotAvailable
			}
			t = &txnMetadata{id: id, coordEpoch: part.epoch, txnFields: txnFields{producerID: pid, lastProducerID: -1,
				producerEpoch: noProducerEpoch, lastProducerEpoch: noProducerEpoch, timeoutMs: timeoutMs,
				state: Empty, startMs: -1, lastUpdateMs: nowMs(), partitions: map[kafka.TopicPartition]struct{}{}}}
			part.txns[id] = t
			c.byPID[pid] = t
		}
		c.mu.Unlock()
		t.mu.Lock()
		if t.unloaded.Load() {
			t.mu.Unlock()
			return nil, kerr.NotCoordinator
		}
		if t.state != Dead {
			return t, nil
		}
		t.mu.Unlock() // expired meanwhile: look again
	}
}

// lookup returns the live metadata of id locked, nil if absent, or the error of its
// partition (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS).
func (c *Coordinator) lookup(id string) (*txnMetadata, *kerr.Error) {
	t, e := c.get(id)
	if t == nil {
		return nil, e
	}
	t.mu.Lock()
	if t.unloaded.Load() {
		t.mu.Unlock()
		return nil, kerr.NotCoordinator
	}
	if t.state == Dead {
		t.mu.Unlock()
		return nil, nil
	}
	return t, nil
}

// InitProducerID serves InitProducerId with a transactional ID
// (TransactionCoordinator.handleInitProducerId): a new transactional ID gets a new
// producer ID at epoch 0; a known one gets its epoch bumped (fencing older producers),
// after aborting an ongoing transaction; an exhausted epoch rotates the producer ID.
// expectedPID/expectedEpoch are the KIP-360 fields of v3+ (−1 when absent). Errors:
// INVALID_REQUEST, INVALID_TRANSACTION_TIMEOUT, NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS,
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, expectedPID int64, expectedEpoch int16) (int64, int16, *kerr.Error) {
	if e := c.status(); e != nil {
		return -1, -1, e
	}
	if id == "" {
		return -1, -1, kerr.InvalidRequest
	}
	if timeoutMs <= 0 || timeoutMs > c.opts.MaxTimeoutMs {
		return -1, -1, kerr.InvalidTransactionTimeout
	}
	if err := c.ensureTopic(); err != nil {
		c.log.Warn("creating "+TopicName, "err", err)
		return -1, -1, kerr.CoordinatorNotAvailable
	}
	t, e := c.getOrCreate(id, timeoutMs)
	if e != nil {
		return -1, -1, e
	}
	defer t.mu.Unlock()
	expected := expectedPID >= 0
	valid := t.producerEpoch == noProducerEpoch || expectedPID == t.producerID ||
		(expectedPID == t.lastProducerID && epochExhausted(expectedEpoch))
	if expected && !valid {
		return -1, -1, kerr.ProducerFenced
	}
	switch t.state {
	case PrepareCommit, PrepareAbort:
		if err := c.completeLocked(t); err != nil {
			return -1, -1, kerr.ConcurrentTransactions
		}
	case Ongoing:
		// Kafka fences the epoch, aborts and answers CONCURRENT_TRANSACTIONS so that
		// the client retries; the abort is synchronous here, so the retry's work
		// follows at once.
		if err := c.fenceAndAbortLocked(t); err != nil {
			return -1, -1, kerr.ConcurrentTransactions
		}
	}
	if epochExhausted(t.producerEpoch) && (!expected || expectedEpoch == t.producerEpoch) {
		pid, err := c.opts.NewProducerID()
		if err != nil {
			return -1, -1, kerr.CoordinatorNotAvailable
		}
		err = c.transitLocked(t, func() {
			t.lastProducerID, t.lastProducerEpoch = t.producerID, noProducerEpoch
			if expected {
				t.lastProducerEpoch = t.producerEpoch
			}
			t.producerID, t.producerEpoch = pid, 0
			t.timeoutMs, t.state, t.startMs, t.partitions = timeoutMs, Empty, -1, map[kafka.TopicPartition]struct{}{}
		})
		if err != nil {
			return -1, -1, c.storeError(t, err)
		}
		return t.producerID, t.producerEpoch, nil
	}
	// prepareIncrementProducerEpoch
	newEpoch, newLast := t.producerEpoch+1, noProducerEpoch
	switch {
	case !expected:
	case t.producerEpoch == noProducerEpoch || expectedEpoch == t.producerEpoch:
		newLast = t.producerEpoch
	case t.lastProducerEpoch != noProducerEpoch && expectedEpoch == t.lastProducerEpoch:
		newEpoch, newLast = t.producerEpoch, t.lastProducerEpoch // a retry
	default:
		return -1, -1, kerr.ProducerFenced
	}
	err := c.transitLocked(t, func() {
		t.producerEpoch, t.lastProducerEpoch = newEpoch, newLast
		t.timeoutMs, t.state, t.startMs, t.partitions = timeoutMs, Empty, -1, map[kafka.TopicPartition]struct{}{}
	})
	if err != nil {
		return -1, -1, c.storeError(t, err)
	}
	return t.producerID, t.producerEpoch, nil
}

// lockProducer returns the transaction of id locked, for a client request of producer
// pid/epoch; the caller unlocks t.mu. Errors: COORDINATOR_NOT_AVAILABLE (from status),
// INVALID_REQUEST (empty id), NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// INVALID_PRODUCER_ID_MAPPING (unknown id or another producer ID), PRODUCER_FENCED
// (another epoch).
func (c *Coordinator) lockProducer(id string, pid int64, epoch int16) (*txnMetadata, *kerr.Error) {
	if e := c.status(); e != nil {
		return nil, e
	}
	if id == "" {
		return nil, kerr.InvalidRequest
	}
	t, e := c.lookup(id)
	if e != nil {
		return nil, e
	}
	if t == nil {
		return nil, kerr.InvalidProducerIDMapping
	}
	e = kerr.InvalidProducerIDMapping
	if t.producerID == pid {
		if t.producerEpoch == epoch {
			return t, nil
		}
		e = kerr.ProducerFenced
	}
	t.mu.Unlock()
	return nil, e
}

// AddPartitions serves AddPartitionsToTxn (client form, v0–3) for partitions already
// validated by the broker (TransactionCoordinator.handleAddPartitionsToTransaction):
// the transaction becomes Ongoing with the partitions added. Errors: INVALID_REQUEST,
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, parts []kafka.TopicPartition) *kerr.Error {
	t, e := c.lockProducer(id, pid, epoch)
	if e != nil {
		return e
	}
	defer t.mu.Unlock()
	if t.state == PrepareCommit || t.state == PrepareAbort {
		if err := c.completeLocked(t); err != nil {
			return kerr.ConcurrentTransactions
		}
	}
	if t.state == Ongoing {
		all := true
		for _, tp := range parts {
			if _, ok := t.partitions[tp]; !ok {
				all = false
				break
			}
		}
		if all {
			return nil
		}
	}
	err := c.transitLocked(t, func() {
		if t.state != Ongoing {
			t.startMs = nowMs()
			t.partitions = map[kafka.TopicPartition]struct{}{}
		}
		t.state = Ongoing
		for _, tp := range parts {
			t.partitions[tp] = struct{}{}
		}
	})
	if err != nil {
		return c.storeError(t, err)
	}
	return nil
}

// AddOffsets serves AddOffsetsToTxn: the group's partition of __consumer_offsets joins
// the transaction (KafkaApis.handleAddOffsetsToTxnRequest). Errors as AddPartitions,
// plus INVALID_GROUP_ID for an empty group ID.
func (c *Coordinator) AddOffsets(id string, pid int64, epoch int16, groupID string) *kerr.Error {
	if groupID == "" {
		return kerr.InvalidGroupID
	}
	return c.AddPartitions(id, pid, epoch, []kafka.TopicPartition{{Topic: group.TopicName, Partition: c.opts.Groups.PartitionFor(groupID)}})
}

// WithTxnOffsetCommit runs appendFn — the group coordinator appending a
// TxnOffsetCommit's offsets as a transactional batch to the group's partition
// offsetsPartition of __consumer_offsets — if the transaction of transactional ID id is
// producer pid/epoch's, is Ongoing and holds that partition (added by AddOffsetsToTxn),
// with the transaction locked so that its markers cannot be written before the append
// is done (Kafka 3.6+'s transaction verification of TxnOffsetCommit). Errors:
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS (passed on to the client as Kafka's
// GroupCoordinator does), INVALID_PRODUCER_ID_MAPPING (unknown ID or another producer
// ID), INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) WithTxnOffsetCommit(id string, pid int64, epoch int16, offsetsPartition int32, appendFn func()) *kerr.Error {
	if e := c.status(); e != nil {
		return e
	}
	t, e := c.lookup(id)
	if e != nil {
		return e
	}
	if t == nil {
		return kerr.InvalidProducerIDMapping
	}
	defer t.mu.Unlock()
	if t.producerID != pid {
		return kerr.InvalidProducerIDMapping
	}
	if t.producerEpoch != epoch {
		return kerr.InvalidProducerEpoch
	}
	if _, ok := t.partitions[kafka.TopicPartition{Topic: group.TopicName, Partition: offsetsPartition}]; !ok || t.state != Ongoing {
		return kerr.InvalidTxnState
	}
	appendFn()
	return nil
}

// WithPartition runs appendFn if producer pid/epoch has an Ongoing transaction holding
// tp, with the transaction locked so that EndTxn cannot write its markers before the
// append is done (the produce-side transaction verification of Kafka 3.x). Errors:
// INVALID_PRODUCER_EPOCH (a stale or unknown epoch of the transactional ID),
// INVALID_TXN_STATE (no transaction, or tp not added), NOT_ENOUGH_REPLICAS (the
// producer ID is not known while a partition is loading, or its partition was just
// resigned: Kafka's translation of COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR for a
// produce, retriable), COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) WithPartition(pid int64, epoch int16, tp kafka.TopicPartition, appendFn func()) *kerr.Error {
	if e := c.status(); e != nil {
		return e
	}
	c.mu.Lock()
	t := c.byPID[pid]
	loading := c.loadingLocked()
	c.mu.Unlock()
	if t == nil {
		if loading {
			return kerr.NotEnoughReplicas
		}
		return kerr.InvalidTxnState
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.unloaded.Load() {
		return kerr.NotEnoughReplicas
	}
	if t.state == Dead || t.producerID != pid {
		return kerr.InvalidTxnState
	}
	if t.producerEpoch != epoch {
		return kerr.InvalidProducerEpoch
	}
	if _, ok := t.partitions[tp]; !ok || t.state != Ongoing {
		return kerr.InvalidTxnState
	}
	appendFn()
	return nil
}

// EndTxn serves EndTxn v0–4 (TransactionCoordinator.handleEndTransaction): an Ongoing
// transaction goes to PrepareCommit/PrepareAbort (logged: the outcome is decided),
// its markers are written and it ends CompleteCommit/CompleteAbort. Markers that fail
// are retried by Run, the outcome standing. A retry of a completed EndTxn succeeds.
// Errors: INVALID_REQUEST, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, INVALID_TXN_STATE,
// CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit bool) *kerr.Error {
	t, e := c.lockProducer(id, pid, epoch)
	if e != nil {
		return e
	}
	defer t.mu.Unlock()
	want := map[bool]State{true: CompleteCommit, false: CompleteAbort}[commit]
	prep := map[bool]State{true: PrepareCommit, false: PrepareAbort}[commit]
	switch t.state {
	case Ongoing:
		if err := c.transitLocked(t, func() { t.state = prep }); err != nil {
			return c.storeError(t, err)
		}
		if err := c.completeLocked(t); err != nil {
			c.log.Warn("writing transaction markers; retried later", "transactional.id", t.id, "err", err)
		}
		return nil
	case want:
		return nil
	case prep:
		if err := c.completeLocked(t); err != nil {
			return kerr.ConcurrentTransactions
		}
		return nil
	}
	return kerr.InvalidTxnState
}

// fenceAndAbortLocked bumps the epoch and aborts the Ongoing transaction with it
// (prepareFenceProducerEpoch + endTransaction(ABORT, isFromClient = false)), so that
// the markers fence the old producer. The caller holds t.mu.
func (c *Coordinator) fenceAndAbortLocked(t *txnMetadata) error {
	if t.producerEpoch == math.MaxInt16 {
		return errors.New("cannot fence a producer at epoch 32767")
	}
	if err := c.transitLocked(t, func() {
		t.producerEpoch++
		t.lastProducerEpoch = noProducerEpoch
		t.state = PrepareAbort
	}); err != nil {
		return err
	}
	return c.completeLocked(t)
}

// completeLocked writes the markers of a PrepareCommit/PrepareAbort transaction to
// every partition of the transaction — the groups' partitions of __consumer_offsets
// added by AddOffsetsToTxn included, where the marker commits or drops the pending
// transactional offsets — then logs CompleteCommit/CompleteAbort
// (TransactionMarkerChannelManager + TransactionStateManager). Partitions whose marker
// is written leave the in-memory set, so a retry writes only the rest. The caller holds
// t.mu.
func (c *Coordinator) completeLocked(t *txnMetadata) error {
	commit := t.state == PrepareCommit
	for _, tp := range t.sortedPartitions() {
		err := c.opts.Markers.WriteMarker(Marker{ProducerID: t.producerID, ProducerEpoch: t.producerEpoch,
			CoordinatorEpoch: t.coordEpoch, Commit: commit, Partition: tp})
		if err != nil && !errors.Is(err, ErrPartitionGone) {
			return err
		}
		delete(t.partitions, tp)
	}
	return c.transitLocked(t, func() {
		if commit {
			t.state = CompleteCommit
		} else {
			t.state = CompleteAbort
		}
		t.partitions = map[kafka.TopicPartition]struct{}{}
	})
}

// abortTimedOut aborts Ongoing transactions older than their timeout with an epoch
// fence (TransactionCoordinator.abortTimedOutTransactions) and retries the markers of
// transactions left in PrepareCommit/PrepareAbort.
func (c *Coordinator) abortTimedOut(now int64) {
	if c.closed.Load() {
		return
	}
	for _, t := range c.all() {
		t.mu.Lock()
		if t.unloaded.Load() {
			t.mu.Unlock()
			continue
		}
		switch {
		case t.state == Ongoing && t.startMs+int64(t.timeoutMs) < now:
			c.log.Info("aborting a timed-out transaction", "transactional.id", t.id, "producer.id", t.producerID, "epoch", t.producerEpoch)
			if err := c.fenceAndAbortLocked(t); err != nil {
				c.log.Warn("aborting a timed-out transaction", "transactional.id", t.id, "err", err)
			}
		case t.state == PrepareCommit || t.state == PrepareAbort:
			if err := c.completeLocked(t); err != nil {
				c.log.Warn("writing transaction markers", "transactional.id", t.id, "err", err)
			}
		}
		t.mu.Unlock()
	}
}

// expireIDs removes transactional IDs with no transaction whose last update is older
// than transactional.id.expiration.ms: a tombstone is written and the state becomes
// Dead (TransactionStateManager.removeExpiredTransactionalIds).
func (c *Coordinator) expireIDs(now int64) {
	if c.closed.Load() {
		return
	}
	for _, t := range c.all() {
		t.mu.Lock()
		if t.unloaded.Load() {
			t.mu.Unlock()
			continue
		}
		if (t.state == Empty || t.state == CompleteCommit || t.state == CompleteAbort) && t.lastUpdateMs+c.opts.IDExpirationMs <= now {
			if err := c.tombstoneLocked(t); err != nil {
				c.log.Warn("expiring a transactional ID", "transactional.id", t.id, "err", err)
			} else {
				t.state = Dead
				c.mu.Lock()
				if part := c.parts[PartitionFor(t.id, c.opts.NumPartitions)]; part != nil && part.txns[t.id] == t {
					delete(part.txns, t.id)
				}
				if c.byPID[t.producerID] == t {
					delete(c.byPID, t.producerID)
				}
				c.mu.Unlock()
			}
		}
		t.mu.Unlock()
	}
}
