// Package txn is kmirror's transaction coordinator: producer ID and epoch allocation per
// transactional ID with fencing, the transaction state machine (Empty, Ongoing,
// PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence),
// transaction markers, transaction timeouts and transactional ID expiration, with
// durable state in the internal topic __transaction_state in Kafka's TxnMetadataKey /
// TxnMetadataValue formats. It follows Apache Kafka's TransactionCoordinator,
// TransactionStateManager, TransactionMetadata and TransactionMarkerChannelManager
// (core/src/main/scala/kafka/coordinator/transaction) with Kafka 3.x semantics
// (transaction version 0/1: no KIP-890 part 2 epoch bump per transaction). On a single
// node the coordinator writes markers through a MarkerWriter (the broker appends them to
// its partition logs) instead of sending WriteTxnMarkers.
package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/record"
)

// ErrPartitionGone is returned by a MarkerWriter for a partition it cannot write a
// marker to for good (topic deleted, or a read-only mirror partition): the coordinator
// drops it from the transaction, as Kafka's TransactionMarkerChannelManager drops a
// partition with no leader ("likely deleted already").
var ErrPartitionGone = errors.New("UNKNOWN_TOPIC_OR_PARTITION")

// Marker is one transaction marker to write (one entry of Kafka's WriteTxnMarkers).
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	Partition        TopicPartition
}

// MarkerWriter writes one COMMIT or ABORT control batch to a partition as its leader
// (Kafka's TransactionMarkerChannelManager + WriteTxnMarkers). It returns nil once the
// marker is durable and visible, ErrPartitionGone for a deleted partition, or another
// error to be retried later.
type MarkerWriter interface {
	WriteMarker(m Marker) error
}

// Groups is the group coordinator as the transaction coordinator needs it
// (implemented by *group.Coordinator): AddOffsetsToTxn adds the group's partition of
// __consumer_offsets to the transaction.
type Groups interface {
	// PartitionFor is the __consumer_offsets partition of a group.
	PartitionFor(groupID string) int32
}

// Options configures a Coordinator; zero values take Kafka's defaults (noted per field).
type Options struct {
	NumPartitions int32 // transaction.state.log.num.partitions (50)
	MaxTimeoutMs  int32 // transaction.max.timeout.ms (900000)
	// IDExpirationMs is transactional.id.expiration.ms (604800000): a transactional
	// ID with no transaction for this long is removed.
	IDExpirationMs int64
	// AbortIntervalMs is transaction.abort.timed.out.transaction.cleanup.interval.ms
	// (10000): how often timed-out transactions are aborted (and expired IDs removed).
	AbortIntervalMs int64
	// Log opens partition p of __transaction_state; EnsureTopic creates the topic if
	// it does not exist yet (Kafka creates it on the first transactional request).
	Log         func(partition int32) (StateLog, error)
	EnsureTopic func() error
	// NewProducerID allocates a producer ID (Kafka's ProducerIdManager).
	NewProducerID func() (int64, error)
	Markers       MarkerWriter
	Groups        Groups
	Logger        *slog.Logger
}

// Coordinator is the transaction coordinator for every partition of
// __transaction_state (single node: all of them). Safe for concurrent use.
type Coordinator struct {
	opts   Options
	log    *slog.Logger
	closed atomic.Bool

	topicMu sync.Mutex // serializes EnsureTopic
	topicOK bool

	// mu guards txns and byPID. Lock order: txnMetadata.mu before mu.
	mu    sync.Mutex
	txns  map[string]*txnMetadata
	byPID map[int64]*txnMetadata

	stop chan struct{}
	once sync.Once
}

// New returns a coordinator; call Load before serving requests and Run for the timers.
func New(opts Options) *Coordinator {
	if opts.NumPartitions <= 0 {
		opts.NumPartitions = 50
	}
	if opts.MaxTimeoutMs <= 0 {
		opts.MaxTimeoutMs = 900000
	}
	if opts.IDExpirationMs <= 0 {
		opts.IDExpirationMs = 7 * 24 * 3600 * 1000
	}
	if opts.AbortIntervalMs <= 0 {
		opts.AbortIntervalMs = 10000
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{opts: opts, log: opts.Logger, txns: map[string]*txnMetadata{}, byPID: map[int64]*txnMetadata{},
		stop: make(chan struct{})}
}

// coordinatorEpoch is the epoch stamped on markers: a single node never changes
// coordinator, so it is constant.
const coordinatorEpoch = 0

// Load replays every partition of __transaction_state when the topic exists (later
// records win, tombstones delete; Kafka's TransactionStateManager.loadTransactionsForTxnTopicPartition),
// then completes transactions left in PrepareCommit/PrepareAbort by writing their
// markers. topicExists reports whether __transaction_state exists.
func (c *Coordinator) Load(topicExists bool) error {
	if !topicExists {
		return nil
	}
	c.topicMu.Lock()
	c.topicOK = true
	c.topicMu.Unlock()
	loaded := map[string]*snapshot{}
	for p := int32(0); p < c.opts.NumPartitions; p++ {
		l, err := c.opts.Log(p)
		if err != nil {
			return err
		}
		_, err = l.Scan(0, func(b record.Batch) error {
			if b.IsControl() {
				return nil
			}
			return record.ForEach(b, func(_, _ int64, key, value []byte) error {
				id, s, err := decodeRecord(key, value)
				if err != nil {
					c.log.Warn("skipping an unreadable transaction log record", "partition", p, "err", err)
					return nil
				}
				if s == nil {
					delete(loaded, id)
				} else {
					loaded[id] = s
				}
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("loading %s-%d: %w", TopicName, p, err)
		}
	}
	for id, s := range loaded {
		t := &txnMetadata{id: id, txnFields: txnFields{producerID: s.producerID, lastProducerID: -1,
			producerEpoch: s.producerEpoch, lastProducerEpoch: noProducerEpoch, timeoutMs: s.timeoutMs,
			state: s.state, startMs: s.startMs, lastUpdateMs: s.lastUpdateMs, partitions: map[TopicPartition]struct{}{}}}
		for _, tp := range s.partitions {
			t.partitions[tp] = struct{}{}
		}
		if t.state == Dead {
			continue
		}
		c.txns[id] = t
		c.byPID[t.producerID] = t
	}
	for _, t := range c.all() {
		t.mu.Lock()
		switch t.state {
		case PrepareCommit, PrepareAbort:
			if err := c.completeLocked(t); err != nil {
				c.log.Warn("completing a loaded transaction; retried later", "transactional.id", t.id, "err", err)
			}
		}
		t.mu.Unlock()
	}
	return nil
}

// Run aborts timed-out transactions and removes expired transactional IDs every
// AbortIntervalMs until ctx ends or Close (Kafka's "transaction-abort" and
// "transactionalId-expiration" scheduled tasks).
func (c *Coordinator) Run(ctx context.Context) {
	tk := time.NewTicker(time.Duration(c.opts.AbortIntervalMs) * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.stop:
			return
		case <-tk.C:
			c.abortTimedOut(time.Now().UnixMilli())
			c.expireIDs(time.Now().UnixMilli())
		}
	}
}

// Close stops Run (if running) and makes every request answer
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.once.Do(func() {
		c.closed.Store(true)
		close(c.stop)
	})
}

func (c *Coordinator) all() []*txnMetadata {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*txnMetadata, 0, len(c.txns))
	for _, t := range c.txns {
		out = append(out, t)
	}
	return out
}

func (c *Coordinator) get(id string) *txnMetadata {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.txns[id]
}

// ensureTopic creates __transaction_state on first use.
func (c *Coordinator) ensureTopic() error {
	c.topicMu.Lock()
	defer c.topicMu.Unlock()
	if c.topicOK {
		return nil
	}
	if c.opts.EnsureTopic != nil {
		if err := c.opts.EnsureTopic(); err != nil {
			return err
		}
	}
	c.topicOK = true
	return nil
}

// EnsureTopic creates __transaction_state if needed (FindCoordinator with key type
// transaction does this in Kafka). Errors are the broker's topic creation errors.
func (c *Coordinator) EnsureTopic() error { return c.ensureTopic() }

// writeLocked appends t's current state to its partition of __transaction_state
// (TransactionStateManager.appendTransactionToLog). The caller holds t.mu.
func (c *Coordinator) writeLocked(t *txnMetadata) error {
	if err := c.ensureTopic(); err != nil {
		return err
	}
	l, err := c.opts.Log(PartitionFor(t.id, c.opts.NumPartitions))
	if err != nil {
		return err
	}
	_, err = l.Append([]record.KV{{Key: keyBytes(t.id), Value: valueBytes(t.snapshot())}})
	return err
}

// tombstoneLocked deletes t from __transaction_state. The caller holds t.mu.
func (c *Coordinator) tombstoneLocked(t *txnMetadata) error {
	l, err := c.opts.Log(PartitionFor(t.id, c.opts.NumPartitions))
	if err != nil {
		return err
	}
	_, err = l.Append([]record.KV{{Key: keyBytes(t.id)}})
	return err
}

// status is the coordinator-level error, or nil.
func (c *Coordinator) status() *kerr.Error {
	if c.closed.Load() {
		return kerr.CoordinatorNotAvailable
	}
	return nil
}

// storeError maps a failed state-log append: Kafka answers COORDINATOR_NOT_AVAILABLE
// for most append failures (TransactionStateManager.appendTransactionToLog).
func (c *Coordinator) storeError(t *txnMetadata, err error) *kerr.Error {
	c.log.Warn("appending to the transaction log failed", "transactional.id", t.id, "err", err)
	return kerr.CoordinatorNotAvailable
}
