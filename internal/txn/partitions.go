package txn

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/record"
)

// partState is the state of an elected partition of __transaction_state.
type partState int8

const (
	partLoading partState = iota + 1 // being replayed: COORDINATOR_LOAD_IN_PROGRESS
	partLoaded                       // served
	partFailed                       // the load failed: NOT_COORDINATOR until elected again
)

// txnPartition is one elected partition of __transaction_state (Kafka's
// TxnMetadataCacheEntry, with its loading state).
type txnPartition struct {
	state     partState // guarded by Coordinator.mu
	epoch     int32     // coordinator epoch: the partition's leader epoch at the election
	txns      map[string]*txnMetadata
	retired   []*txnMetadata // of an earlier load of the partition: requests on them end before this load reads
	err       error
	done      chan struct{}
	abandoned atomic.Bool
}

var errAbandoned = errors.New("txn: load abandoned")

// partitionLocked returns the loaded partition p, or NOT_COORDINATOR (not elected,
// failed) or COORDINATOR_LOAD_IN_PROGRESS. The caller holds mu.
func (c *Coordinator) partitionLocked(p int32) (*txnPartition, *kerr.Error) {
	part := c.parts[p]
	switch {
	case part == nil || part.state == partFailed:
		return nil, kerr.NotCoordinator
	case part.state == partLoading:
		return nil, kerr.CoordinatorLoadInProgress
	}
	return part, nil
}

func (c *Coordinator) loadingLocked() bool {
	for _, part := range c.parts {
		if part.state == partLoading {
			return true
		}
	}
	return false
}

// OnElection makes this broker the transaction coordinator of partition p of
// __transaction_state at leaderEpoch, the coordinator epoch its markers carry
// (TransactionCoordinator.onElection → TransactionStateManager
// .loadTransactionsForTxnTopicPartition). The partition is replayed in the background
// (later records win, tombstones delete) while its transactional IDs get
// COORDINATOR_LOAD_IN_PROGRESS; then transactions found in PrepareCommit/PrepareAbort
// get their markers written and are completed, and the partition is served. An election
// with an epoch below the highest seen for p, or not above that of the latest
// resignation, is stale and ignored; one at the epoch of the current election does
// nothing; a newer one while loaded reloads the partition at the new epoch (as Kafka
// replaces the cache entry). A failed load leaves the partition unowned
// (NOT_COORDINATOR) until elected again; AwaitLoaded reports it.
func (c *Coordinator) OnElection(p int32, leaderEpoch int32) {
	if p < 0 || p >= c.opts.NumPartitions {
		c.log.Warn("ignoring an election for a partition out of range", "partition", p, "partitions", c.opts.NumPartitions)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return
	}
	if cur, ok := c.epochs[p]; ok && leaderEpoch < cur {
		c.log.Info("ignoring a stale election", "partition", p, "epoch", leaderEpoch, "current_epoch", cur)
		return
	}
	if r, ok := c.resigned[p]; ok && leaderEpoch <= r {
		c.log.Info("ignoring an election not newer than the latest resignation", "partition", p, "epoch", leaderEpoch, "resigned_epoch", r)
		return
	}
	c.epochs[p] = leaderEpoch
	if part := c.parts[p]; part != nil && part.state != partFailed {
		if part.epoch == leaderEpoch {
			return
		}
		c.unloadLocked(p, part)
	}
	part := &txnPartition{state: partLoading, epoch: leaderEpoch, done: make(chan struct{}), retired: c.retired[p]}
	delete(c.retired, p)
	c.parts[p] = part
	c.log.Info("elected as the transaction coordinator of a partition; loading it", "partition", p, "epoch", leaderEpoch)
	c.loads.Add(1)
	go c.load(p, part)
}

// OnResignation stops this broker coordinating partition p of __transaction_state
// (TransactionCoordinator.onResignation → removeTransactionsForTxnTopicPartition): a
// load in progress is abandoned and the partition's transactions are dropped from
// memory (nothing is written), so that their transactional IDs get NOT_COORDINATOR; a
// request already working on one finishes. leaderEpoch is the partition's new leader
// epoch; a resignation with an epoch below the highest seen is stale and ignored; a
// negative epoch (unknown, e.g. the partition was deleted) always applies.
func (c *Coordinator) OnResignation(p int32, leaderEpoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if leaderEpoch >= 0 {
		if cur, ok := c.epochs[p]; ok && leaderEpoch < cur {
			c.log.Info("ignoring a stale resignation", "partition", p, "epoch", leaderEpoch, "current_epoch", cur)
			return
		}
		c.epochs[p] = leaderEpoch
		c.resigned[p] = leaderEpoch
	}
	if part := c.parts[p]; part != nil {
		c.unloadLocked(p, part)
		c.log.Info("resigned as the transaction coordinator of a partition", "partition", p, "epoch", leaderEpoch, "transactions", len(part.txns))
	}
}

// unloadLocked drops partition p and its transactions; they are kept as retired until
// the next load of p, which waits for requests still working on them (so that it reads
// what they write). The caller holds mu.
func (c *Coordinator) unloadLocked(p int32, part *txnPartition) {
	part.abandoned.Store(true)
	delete(c.parts, p)
	for _, t := range part.txns {
		t.unloaded.Store(true)
		if c.byPID[t.producerID] == t {
			delete(c.byPID, t.producerID)
		}
		c.retired[p] = append(c.retired[p], t)
	}
}

// AwaitLoaded waits until no elected partition is loading (the prepared transactions
// found by the loads completed, or left to the timer when their markers failed), then
// returns the errors of the partitions whose load failed, or ctx's error. A
// one-node cluster calls it at start, after electing every partition.
func (c *Coordinator) AwaitLoaded(ctx context.Context) error {
	for {
		c.mu.Lock()
		var wait []chan struct{}
		var errs []error
		for _, part := range c.parts {
			select {
			case <-part.done:
				if part.state == partFailed {
					errs = append(errs, part.err)
				}
			default:
				wait = append(wait, part.done)
			}
		}
		c.mu.Unlock()
		if len(wait) == 0 {
			return errors.Join(errs...)
		}
		for _, ch := range wait {
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// load replays partition p (TransactionStateManager.loadTransactionMetadata), installs
// its transactions unless the partition was resigned meanwhile, then completes those in
// PrepareCommit/PrepareAbort by writing their markers (addTxnMarkersToSend).
func (c *Coordinator) load(p int32, part *txnPartition) {
	defer c.loads.Done()
	start := time.Now()
	// A request that took a retired transaction before the unload finishes its log
	// write first; later ones find it unloaded.
	for _, t := range part.retired {
		t.awaitIdle()
	}
	part.retired = nil
	loaded, err := c.replay(p, part)
	c.mu.Lock()
	if c.parts[p] != part || part.abandoned.Load() {
		if c.parts[p] == part {
			delete(c.parts, p) // closed
		}
		c.mu.Unlock()
		close(part.done)
		return
	}
	if err != nil {
		part.state, part.err = partFailed, fmt.Errorf("txn: load %s-%d: %w", TopicName, p, err)
		c.mu.Unlock()
		close(part.done)
		c.log.Error("loading a partition of "+TopicName+" failed; it is not coordinated until elected again", "partition", p, "err", err)
		return
	}
	part.txns = map[string]*txnMetadata{}
	var prepared []*txnMetadata
	for id, s := range loaded {
		if s.state == Dead {
			continue
		}
		t := &txnMetadata{id: id, coordEpoch: part.epoch, txnFields: txnFields{producerID: s.producerID, lastProducerID: -1,
			producerEpoch: s.producerEpoch, lastProducerEpoch: noProducerEpoch, timeoutMs: s.timeoutMs,
			state: s.state, startMs: s.startMs, lastUpdateMs: s.lastUpdateMs, partitions: map[kafka.TopicPartition]struct{}{}}}
		for _, tp := range s.partitions {
			t.partitions[tp] = struct{}{}
		}
		part.txns[id] = t
		c.byPID[t.producerID] = t
		if t.state == PrepareCommit || t.state == PrepareAbort {
			prepared = append(prepared, t)
		}
	}
	part.state = partLoaded
	n := len(part.txns)
	c.mu.Unlock()
	for _, t := range prepared {
		t.mu.Lock()
		if !t.unloaded.Load() && (t.state == PrepareCommit || t.state == PrepareAbort) {
			if err := c.completeLocked(t); err != nil {
				c.log.Warn("completing a loaded transaction; retried later", "transactional.id", t.id, "err", err)
			}
		}
		t.mu.Unlock()
	}
	close(part.done)
	c.log.Info("loaded transaction metadata", "partition", p, "epoch", part.epoch, "transactions", n,
		"completed", len(prepared), "ms", time.Since(start).Milliseconds())
}

// replay reads partition p: the last record of each transactional ID wins, a tombstone
// deletes it.
func (c *Coordinator) replay(p int32, part *txnPartition) (map[string]*snapshot, error) {
	l, err := c.opts.Log(p)
	if err != nil {
		return nil, err
	}
	loaded := map[string]*snapshot{}
	_, err = l.Scan(0, func(b record.Batch) error {
		if part.abandoned.Load() {
			return errAbandoned
		}
		if b.IsControl() {
			return nil
		}
		it := record.IterRecords(b)
		for it.Next() {
			r := it.Record()
			id, s, err := decodeRecord(r.Key, r.Value)
			if err != nil {
				c.log.Warn("skipping an unreadable transaction log record", "partition", p, "err", err)
				continue
			}
			if s == nil {
				delete(loaded, id)
			} else {
				loaded[id] = s
			}
		}
		return it.Err()
	})
	return loaded, err
}
