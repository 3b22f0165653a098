package txn

import (
	"reflect"
	"testing"

	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/kafka"
)

// TestPartitionForMatchesGroupHash: transactional IDs map to partitions with the same
// Java String.hashCode rule as group IDs (Utils.abs(hashCode) % n).
func TestPartitionForMatchesGroupHash(t *testing.T) {
	gc := group.New(group.Options{NumPartitions: 50})
	for _, id := range []string{"", "a", "tx-1", "hello", "polygenelubricants", "日本語-txn", "GydZG_"} {
		if got, want := PartitionFor(id, 50), gc.PartitionFor(id); got != want {
			t.Errorf("PartitionFor(%q) = %d, group hash gives %d", id, got, want)
		}
	}
	if got := PartitionFor("hello", 50); got != 99162322%50 {
		t.Errorf("PartitionFor(hello) = %d", got)
	}
}

// TestRecordRoundTrip: TxnMetadataKey/TxnMetadataValue v0 encode and decode back,
// partitions grouped by topic; a nil value is a tombstone.
func TestRecordRoundTrip(t *testing.T) {
	s := snapshot{producerID: 7, producerEpoch: 3, timeoutMs: 60000, state: PrepareCommit,
		partitions: []kafka.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: 1}}, lastUpdateMs: 1234, startMs: 1000}
	id, got, err := decodeRecord(keyBytes("tx"), valueBytes(s))
	if err != nil {
		t.Fatal(err)
	}
	if id != "tx" || !reflect.DeepEqual(*got, s) {
		t.Fatalf("decoded %q %+v, want %+v", id, got, s)
	}
	id, got, err = decodeRecord(keyBytes("tx"), nil)
	if err != nil || id != "tx" || got != nil {
		t.Fatalf("tombstone: %q %v %v", id, got, err)
	}
	if _, _, err := decodeRecord([]byte{0}, nil); err == nil {
		t.Fatal("a truncated key decoded")
	}
}

// TestStateNames: Kafka's state names round-trip through ParseState.
func TestStateNames(t *testing.T) {
	for s := Empty; s <= PrepareEpochFence; s++ {
		if p, ok := ParseState(s.String()); !ok || p != s {
			t.Errorf("ParseState(%s) = %v %v", s, p, ok)
		}
	}
	if _, ok := ParseState("Bogus"); ok {
		t.Error("ParseState(Bogus) succeeded")
	}
}
