package broker

import (
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/storage"
)

// TestFetchFromDeletedLogIsUnknownPartition: a log closed by a topic deletion while a
// fetch reads it answers UNKNOWN_TOPIC_OR_PARTITION (as Kafka does for a partition it no
// longer hosts), not KAFKA_STORAGE_ERROR.
func TestFetchFromDeletedLogIsUnknownPartition(t *testing.T) {
	l, err := storage.Open(t.TempDir(), [16]byte{1}, storage.DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b := &Broker{logger: slog.New(slog.DiscardHandler)}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	sp := kmsg.NewFetchResponseTopicPartition()
	b.fetchPartition(l, &fetchData{}, rangeKey{}, rp, false, 1<<20, true, &sp)
	if sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("error code %d (%v), want UNKNOWN_TOPIC_OR_PARTITION", sp.ErrorCode, kerr.ErrorForCode(sp.ErrorCode))
	}
}
