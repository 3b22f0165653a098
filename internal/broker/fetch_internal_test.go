package broker

import (
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/partition"
	"github.com/kmirror/kmirror/internal/storage"
)

// TestFetchFromDeletedLogIsUnknownPartition: a log closed by a topic deletion while a
// fetch reads it answers UNKNOWN_TOPIC_OR_PARTITION (as Kafka does for a partition it no
// longer hosts), not KAFKA_STORAGE_ERROR.
func TestFetchFromDeletedLogIsUnknownPartition(t *testing.T) {
	logs, err := storage.OpenManager(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	rm := partition.NewReplicaManager(partition.Options{NodeID: 1, Logs: logs,
		Config: func(*metadata.Topic) storage.Config { return storage.DefaultConfig() }})
	id := metadata.NewTopicID()
	tp := &metadata.Topic{Name: "t", ID: id, Partitions: 1, Registrations: []*metadata.PartitionRegistration{{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}}
	im := &metadata.Image{Offset: 1, Topics: map[string]*metadata.Topic{"t": tp}, TopicsByID: map[metadata.TopicID]*metadata.Topic{id: tp}}
	if err := rm.Apply(im); err != nil {
		t.Fatal(err)
	}
	part := rm.Get("t", 0)
	if err := part.Log().Close(); err != nil {
		t.Fatal(err)
	}
	b := &Broker{logger: slog.New(slog.DiscardHandler)}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	sp := kmsg.NewFetchResponseTopicPartition()
	b.fetchPartition(part, &fetchData{}, kafka.TopicIDPartition{}, rp, follower{}, false, 1<<20, true, &sp)
	if sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("error code %d (%v), want UNKNOWN_TOPIC_OR_PARTITION", sp.ErrorCode, kerr.ErrorForCode(sp.ErrorCode))
	}
}
