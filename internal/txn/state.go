package txn

import (
	"github.com/kmirror/kmirror/internal/kafka"
	"math"
	"sort"
	"sync"
	"sync/atomic"
)

// State is a transaction's state, with Kafka's TransactionState codes as stored in a
// TxnMetadataValue (0 Empty … 7 PrepareEpochFence).
type State int8

// Transaction states (Kafka's TransactionState).
const (
	Empty             State = 0 // no transaction since the last InitProducerId
	Ongoing           State = 1 // partitions were added; records may be produced
	PrepareCommit     State = 2 // EndTxn(commit) logged; markers being written
	PrepareAbort      State = 3 // EndTxn(abort) or a timeout logged; markers being written
	CompleteCommit    State = 4 // COMMIT markers written
	CompleteAbort     State = 5 // ABORT markers written
	Dead              State = 6 // transactional ID expired (tombstoned)
	PrepareEpochFence State = 7 // transient: epoch bumped to fence, abort to follow
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String is Kafka's state name, as DescribeTransactions and ListTransactions show it.
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "Unknown"
	}
	return stateNames[s]
}

// ParseState returns the state named name (Kafka's TransactionState.fromName).
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// noProducerEpoch is RecordBatch.NO_PRODUCER_EPOCH.
const noProducerEpoch int16 = -1

// epochExhausted is TransactionMetadata.isEpochExhausted: the epoch cannot be bumped
// twice more (a fence plus an InitProducerId), so the next InitProducerId rotates the
// producer ID.
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// txnFields is the persisted part of a transaction's metadata (Kafka's
// TransactionMetadata fields that a TxnTransitMetadata carries).
type txnFields struct {
	producerID        int64
	lastProducerID    int64
	producerEpoch     int16
	lastProducerEpoch int16
	timeoutMs         int32
	state             State
	partitions        map[kafka.TopicPartition]struct{}
	startMs           int64 // txnStartTimestamp, −1 when no transaction
	lastUpdateMs      int64
}

// txnMetadata is one transactional ID's state (Kafka's TransactionMetadata). mu guards
// everything but id; it is held across the log append of a transition and the marker
// writes, so a transition is never observed half done.
type txnMetadata struct {
	mu sync.Mutex
	id string
	// coordEpoch is the coordinator epoch of the partition's election that loaded or
	// created it, stamped on its markers.
	coordEpoch int32
	// unloaded is set (under Coordinator.mu) when its partition is resigned or
	// reloaded: a request that finds it set answers NOT_COORDINATOR.
	unloaded atomic.Bool
	txnFields
}

// awaitIdle returns once no request holds t.
func (t *txnMetadata) awaitIdle() {
	t.mu.Lock()
	//lint:ignore SA2001 the empty critical section is the point: a barrier
	t.mu.Unlock()
}

func (t *txnMetadata) sortedPartitions() []kafka.TopicPartition {
	out := make([]kafka.TopicPartition, 0, len(t.partitions))
	for tp := range t.partitions {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// snapshot is the persisted form of a transition (Kafka's TxnTransitMetadata).
type snapshot struct {
	producerID    int64
	producerEpoch int16
	timeoutMs     int32
	state         State
	partitions    []kafka.TopicPartition
	lastUpdateMs  int64
	startMs       int64
}

func (t *txnMetadata) snapshot() snapshot {
	return snapshot{t.producerID, t.producerEpoch, t.timeoutMs, t.state, t.sortedPartitions(), t.lastUpdateMs, t.startMs}
}
