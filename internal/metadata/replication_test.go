package metadata

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestReplicationFields applies the replication fields of PartitionRecord and
// PartitionChangeRecord (Kafka 4.x's): adding and removing replicas, ELR, last-known ELR
// and the leader recovery state are kept, set empty by an empty list, left alone by a
// nil one, survive a snapshot and the forwarded encoding, and are validated.
func TestReplicationFields(t *testing.T) {
	c := open(t, t.TempDir(), "")
	defer c.Close()
	ep := []Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: "PLAINTEXT"}}
	apply(t, c, RegisterBrokerRecord{BrokerID: 1, Endpoints: ep}, RegisterBrokerRecord{BrokerID: 2, Endpoints: ep},
		RegisterBrokerRecord{BrokerID: 3, Endpoints: ep}, RegisterBrokerRecord{BrokerID: 4, Endpoints: ep})
	id := NewTopicID()
	im := apply(t, c, TopicRecord{Name: "t", ID: id, Partitions: 1},
		PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1, 2, 3, 4}, ISR: []int32{1, 2}, Leader: 1,
			AddingReplicas: []int32{4}, RemovingReplicas: []int32{3}, ELR: []int32{3}, LastKnownELR: []int32{4}, LeaderRecoveryState: LeaderRecovering})
	want := &PartitionRegistration{Replicas: []int32{1, 2, 3, 4}, ISR: []int32{1, 2}, Leader: 1,
		AddingReplicas: []int32{4}, RemovingReplicas: []int32{3}, ELR: []int32{3}, LastKnownELR: []int32{4}, LeaderRecoveryState: LeaderRecovering}
	if got := im.Topics["t"].Partition(0); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the PartitionRecord:\n got %+v\nwant %+v", got, want)
	}
	recovered := LeaderRecovered
	// ISR grows, ELR emptied, the rest unchanged; the leader epoch stays (no leader change).
	im = apply(t, c, PartitionChangeRecord{TopicID: id, Partition: 0, ISR: []int32{1, 2, 3}, ELR: []int32{}, LeaderRecoveryState: &recovered})
	want = &PartitionRegistration{Replicas: []int32{1, 2, 3, 4}, ISR: []int32{1, 2, 3}, Leader: 1, PartitionEpoch: 1,
		AddingReplicas: []int32{4}, RemovingReplicas: []int32{3}, LastKnownELR: []int32{4}}
	if got := im.Topics["t"].Partition(0); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the change:\n got %+v\nwant %+v", got, want)
	}
	// A reassignment completing: replicas, adding and removing replicas set together.
	im = apply(t, c, PartitionChangeRecord{TopicID: id, Partition: 0, Replicas: []int32{1, 2, 4}, ISR: []int32{1, 2}, AddingReplicas: []int32{}, RemovingReplicas: []int32{}, Leader: i32p(1), LeaderEpoch: 1})
	want = &PartitionRegistration{Replicas: []int32{1, 2, 4}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2, LastKnownELR: []int32{4}}
	if got := im.Topics["t"].Partition(0); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the reassignment:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(cloneImage(t, im).Topics["t"], im.Topics["t"]) {
		t.Fatal("the replication fields do not survive a snapshot")
	}

	bad := int8(2)
	for _, tc := range []struct {
		name string
		rec  Record
		want error
	}{
		{"ELR inside the ISR", PartitionChangeRecord{TopicID: id, Partition: 0, ELR: []int32{1}, LeaderEpoch: 1}, ErrInvalidRecord},
		{"ELR outside the replicas", PartitionChangeRecord{TopicID: id, Partition: 0, ELR: []int32{7}, LeaderEpoch: 1}, ErrInvalidRecord},
		{"last-known ELR outside the replicas", PartitionChangeRecord{TopicID: id, Partition: 0, LastKnownELR: []int32{7}, LeaderEpoch: 1}, ErrInvalidRecord},
		{"adding and removing one replica", PartitionChangeRecord{TopicID: id, Partition: 0, AddingReplicas: []int32{4}, RemovingReplicas: []int32{4}, LeaderEpoch: 1}, ErrInvalidRecord},
		{"duplicate adding replicas", PartitionChangeRecord{TopicID: id, Partition: 0, AddingReplicas: []int32{4, 4}, LeaderEpoch: 1}, ErrInvalidRecord},
		{"leader recovery state 2", PartitionChangeRecord{TopicID: id, Partition: 0, LeaderRecoveryState: &bad, LeaderEpoch: 1}, ErrInvalidRecord},
		{"replicas dropping an ISR member", PartitionChangeRecord{TopicID: id, Partition: 0, Replicas: []int32{1, 4}, LeaderEpoch: 1}, ErrInvalidRecord},
		{"new replica on an unregistered broker", PartitionChangeRecord{TopicID: id, Partition: 0, Replicas: []int32{1, 2, 4, 9}, LeaderEpoch: 1}, ErrStalePlacement},
		{"removing replica in a new partition outside the replicas", TopicRecordWith(NewTopicID(), PartitionRecord{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, RemovingReplicas: []int32{2}}), ErrInvalidRecord},
	} {
		recs := []Record{tc.rec}
		if multi, ok := tc.rec.(multiRecord); ok {
			recs = multi
		}
		if _, err := c.Apply(t.Context(), recs...); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	// The forwarded encoding keeps "empty" apart from "unchanged".
	rec := PartitionChangeRecord{TopicID: id, Partition: 0, ISR: nil, ELR: []int32{}, AddingReplicas: []int32{2}, LeaderRecoveryState: &recovered}
	data, err := EncodeBatch([]Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeBatch(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := back[0].(PartitionChangeRecord); got.ISR != nil || got.ELR == nil || len(got.ELR) != 0 || got.RemovingReplicas != nil || !reflect.DeepEqual(got.AddingReplicas, []int32{2}) {
		t.Fatalf("round trip of %+v: %+v", rec, got)
	}
}

// TestReplayLogBeforeReplication opens a metadata log written by the release before the
// replication fields (testdata/before-replication: three brokers, a topic of two RF 3
// partitions, a leader change, a snapshot, then an unclean-style change to RECOVERING
// and a producer-ID block): the snapshot and the log tail replay to the image that
// release had, and the log takes new records on top.
func TestReplayLogBeforeReplication(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "before-replication")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(Options{Dir: dir, NodeID: 1, ClusterID: "Ek1c5vPxT9ahIFVBRtd6Jw", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	im := c.Image()
	orders := im.Topics["orders"]
	if orders == nil || len(im.Brokers) != 3 || im.NextProducerID != 1000 {
		t.Fatalf("replayed image: topics %v, brokers %v, next producer ID %d", im.TopicNames(), im.BrokerIDs(), im.NextProducerID)
	}
	want0 := &PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1}
	want1 := &PartitionRegistration{Replicas: []int32{2, 3, 1}, ISR: []int32{3}, Leader: 3, LeaderEpoch: 1, PartitionEpoch: 1, LeaderRecoveryState: LeaderRecovering}
	if got := orders.Partition(0); !reflect.DeepEqual(got, want0) {
		t.Fatalf("partition 0 (from the snapshot):\n got %+v\nwant %+v", got, want0)
	}
	if got := orders.Partition(1); !reflect.DeepEqual(got, want1) {
		t.Fatalf("partition 1 (from the log tail):\n got %+v\nwant %+v", got, want1)
	}
	recovered := LeaderRecovered
	im = apply(t, c, PartitionChangeRecord{TopicID: orders.ID, Partition: 1, ISR: []int32{3, 1}, LeaderEpoch: 1, LeaderRecoveryState: &recovered})
	if p := im.Topics["orders"].Partition(1); p.LeaderRecoveryState != LeaderRecovered || p.PartitionEpoch != 2 || !reflect.DeepEqual(p.ISR, []int32{3, 1}) {
		t.Fatalf("after a new change: %+v", p)
	}
}
