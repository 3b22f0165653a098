package txn

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/record"
)

// TopicName is Kafka's internal topic holding the transaction log.
const TopicName = "__transaction_state"

// StateLog is one partition of __transaction_state as the coordinator needs it; the
// broker supplies it over its real partition log, as the leader of the partition (the
// methods of group.PartitionLog it needs, with the same contracts).
type StateLog interface {
	// Append appends one uncompressed batch holding recs (record.Build, producer ID
	// -1), assigning offsets; it returns the batch's base offset once the batch is
	// durable and visible.
	Append(recs []record.KV) (int64, error)
	// Scan calls fn for every batch, control batches included, from the batch holding
	// offset from (the log start if from is below it) to the log end offset, in offset
	// order; it returns the offset after the last batch it read.
	Scan(from int64, fn func(b record.Batch) error) (int64, error)
}

// PartitionFor is the __transaction_state partition of a transactional ID:
// Utils.abs(transactionalId.hashCode) % n with Java's String.hashCode over UTF-16
// (TransactionStateManager.partitionFor).
func PartitionFor(transactionalID string, n int32) int32 {
	return kafka.Abs(kafka.StringHashCode(transactionalID)) % n
}

// keyBytes is a TxnMetadataKey v0 (TransactionLog.keyToBytes).
func keyBytes(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: 0, TransactionalID: id}
	return k.AppendTo(nil)
}

// valueBytes is a TxnMetadataValue v0 (TransactionLog.valueToBytes as Kafka 3.x
// writes it for transaction version 0/1).
func valueBytes(s snapshot) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = 0
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = s.producerID, s.producerEpoch, s.timeoutMs
	v.State = kmsg.TransactionState(s.state)
	v.LastUpdateTimestamp, v.StartTimestamp = s.lastUpdateMs, s.startMs
	for _, tp := range s.partitions {
		if n := len(v.Topics); n > 0 && v.Topics[n-1].Topic == tp.Topic {
			v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		t := kmsg.NewTxnMetadataValueTopic()
		t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
		v.Topics = append(v.Topics, t)
	}
	return v.AppendTo(nil)
}

// decodeRecord parses one __transaction_state record; value is nil for a tombstone.
func decodeRecord(key, value []byte) (string, *snapshot, error) {
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", nil, fmt.Errorf("transaction log key: %w", err)
	}
	if k.Version != 0 {
		return "", nil, fmt.Errorf("transaction log key version %d", k.Version)
	}
	if value == nil {
		return k.TransactionalID, nil, nil
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return "", nil, fmt.Errorf("transaction log value of %q: %w", k.TransactionalID, err)
	}
	s := &snapshot{producerID: v.ProducerID, producerEpoch: v.ProducerEpoch, timeoutMs: v.TimeoutMillis,
		state: State(v.State), lastUpdateMs: v.LastUpdateTimestamp, startMs: v.StartTimestamp}
	if s.state < Empty || s.state > PrepareEpochFence {
		return "", nil, fmt.Errorf("transaction log value of %q: unknown state %d", k.TransactionalID, v.State)
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			s.partitions = append(s.partitions, kafka.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	return k.TransactionalID, s, nil
}
