// Package txn is kmirror's transaction coordinator: producer ID and epoch allocation per
// transactional ID with fencing, the transaction state machine (Empty, Ongoing,
// PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence),
// transaction markers, transaction timeouts and transactional ID expiration, with
// durable state in the internal topic __transaction_state in Kafka's TxnMetadataKey /
// TxnMetadataValue formats. It follows Apache Kafka's TransactionCoordinator,
// TransactionStateManager, TransactionMetadata and TransactionMarkerChannelManager
// (core/src/main/scala/kafka/coordinator/transaction) with Kafka 3.x semantics
// (transaction version 0/1: no KIP-890 part 2 epoch bump per transaction). A coordinator
// serves the partitions of __transaction_state it is elected for (OnElection,
// OnResignation), stamping their leader epoch on markers as the coordinator epoch; it
// writes markers through a MarkerWriter (the broker's: local appends, WriteTxnMarkers to
// other leaders) instead of sending WriteTxnMarkers itself.
package txn

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/kafka"
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
	Partition        kafka.TopicPartition
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

// Coordinator is the transaction coordinator for the partitions of
// __transaction_state this broker leads: OnElection loads a partition and serves its
// transactional IDs, OnResignation unloads them (Kafka's TransactionCoordinator
// .onElection / onResignation and TransactionStateManager). Safe for concurrent use.
type Coordinator struct {
	opts   Options
	log    *slog.Logger
	closed atomic.Bool

	topicMu sync.Mutex // serializes EnsureTopic
	topicOK bool

	// mu guards the maps below. Lock order: txnMetadata.mu before mu.
	mu       sync.Mutex
	parts    map[int32]*txnPartition  // elected partitions (loading, loaded or failed)
	epochs   map[int32]int32          // highest leader epoch seen per partition
	resigned map[int32]int32          // leader epoch of the latest resignation per partition
	byPID    map[int64]*txnMetadata   // transactions of the loaded partitions by producer ID
	retired  map[int32][]*txnMetadata // unloaded transactions, until the partition's next load
	loads    sync.WaitGroup

	stop chan struct{}
	once sync.Once
}

// New returns a coordinator that owns no partition (transactional IDs get
// NOT_COORDINATOR until OnElection loads their partition); call Run for the timers.
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
	return &Coordinator{opts: opts, log: opts.Logger, parts: map[int32]*txnPartition{}, epochs: map[int32]int32{},
		resigned: map[int32]int32{}, byPID: map[int64]*txnMetadata{}, retired: map[int32][]*txnMetadata{}, stop: make(chan struct{})}
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

// Close stops Run (if running) and the loads, and makes every request answer
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed.Store(true)
		for _, part := range c.parts {
			part.abandoned.Store(true)
		}
		c.mu.Unlock()
		close(c.stop)
		c.loads.Wait()
	})
}

// all returns the transactions of the loaded partitions.
func (c *Coordinator) all() []*txnMetadata {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*txnMetadata
	for _, part := range c.parts {
		if part.state != partLoaded {
			continue
		}
		for _, t := range part.txns {
			out = append(out, t)
		}
	}
	return out
}

// get returns the transaction of id (nil if absent) or the error of its partition:
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS (TransactionStateManager
// .getTransactionState).
func (c *Coordinator) get(id string) (*txnMetadata, *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	part, e := c.partitionLocked(PartitionFor(id, c.opts.NumPartitions))
	if e != nil {
		return nil, e
	}
	return part.txns[id], nil
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
