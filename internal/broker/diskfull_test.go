package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/record"
)

// mountTmpfs mounts a tmpfs of size (mount's size= option) on a fresh directory, and
// unmounts it when the test ends; the test is skipped where mounting is not permitted.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// Disk full (ENOSPC) mid-produce on a small tmpfs: the produce that does not fit gets
// KAFKA_STORAGE_ERROR, the log directory goes offline (produce and fetch keep answering
// KAFKA_STORAGE_ERROR, other requests are served), and after space is freed a restart
// recovers every acknowledged record, intact and in order.
func TestDiskFullTakesTheLogDirOfflineAndARestartRecovers(t *testing.T) {
	mnt := mountTmpfs(t, "6m")
	b := brokertest.Start(t, map[string]string{"log.dirs": mnt, "offsets.topic.num.partitions": "1", "mirror.state.topic.num.partitions": "1"})
	createTopic(t, b.Client(), "full", 1, map[string]*string{"segment.bytes": kmsg.StringPtr("1048576")})
	c := dialRaw(t, b.Addr())
	value := bytes.Repeat([]byte("x"), 60*1024)
	acked := 0
	var code int16
	for i := 0; i < 200; i++ { // 12 MB: twice the filesystem
		bt := record.Build(record.BatchHeader{Timestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]record.KV{{Key: []byte(fmt.Sprint(i)), Value: value}})
		if code = produceRaw(t, c, "full", bt); code != 0 {
			break
		}
		acked++
	}
	if code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce on a full disk after %d acknowledged batches: error %d, want KAFKA_STORAGE_ERROR", acked, code)
	}
	if acked == 0 {
		t.Fatal("no produce fitted on the filesystem")
	}
	t.Logf("%d batches acknowledged before the disk was full", acked)
	small := record.Build(record.BatchHeader{Timestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]record.KV{{Key: []byte("small"), Value: []byte("v")}})
	if code := produceRaw(t, c, "full", small); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to the offline log directory: error %d, want KAFKA_STORAGE_ERROR", code)
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.SetVersion(11)
	freq.ReplicaID, freq.MaxWaitMillis, freq.MaxBytes = -1, 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "full"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	if fr := c.request(freq).(*kmsg.FetchResponse); fr.Topics[0].Partitions[0].ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch from the offline log directory: error %d, want KAFKA_STORAGE_ERROR", fr.Topics[0].Partitions[0].ErrorCode)
	}
	stillServes(t, b)

	b.Stop()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatal("freeing space (remount):", err)
	}
	b.Restart()
	recs := consumeN(t, b.Client(kgo.ConsumeTopics("full"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), acked)
	for i, r := range recs[:acked] {
		if string(r.Key) != fmt.Sprint(i) || r.Offset != int64(i) || !bytes.Equal(r.Value, value) {
			t.Fatalf("record %d after the restart: key %q offset %d, %d value bytes", i, r.Key, r.Offset, len(r.Value))
		}
	}
	if err := b.Client().ProduceSync(context.Background(), &kgo.Record{Topic: "full", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after the restart with space: %v", err)
	}
}
