package storage

import (
	"context"
	"github.com/kmirror/kmirror/internal/kafka"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestManager(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	m, err := OpenManager(dir, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	id := [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	l, err := m.Open("orders", 3, id, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	if m.Get("orders", 3) != l || m.Get("orders", 4) != nil {
		t.Fatal("Get")
	}
	meta, _ := os.ReadFile(filepath.Join(dir, "orders-3", "partition.metadata"))
	if string(meta) != "version: 0\ntopic_id: 3q2-7wECAwQFBgcICQoLDA\n" {
		t.Fatalf("partition.metadata %q", meta)
	}
	for i := 0; i < 30; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 2, valueSize: 50, ts: int64(i)}), 0)
	}
	if err := l.AdvanceLogStartOffset(21); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open("other.topic-x", 0, [16]byte{9}, DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	ex, err := m.Existing()
	if err != nil || len(ex) != 2 || ex[0] != (kafka.TopicPartition{Topic: "orders", Partition: 3}) || ex[1] != (kafka.TopicPartition{Topic: "other.topic-x", Partition: 0}) {
		t.Fatalf("Existing %v %v", ex, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	rp, _ := os.ReadFile(filepath.Join(dir, "recovery-point-offset-checkpoint"))
	ls, _ := os.ReadFile(filepath.Join(dir, "log-start-offset-checkpoint"))
	if string(rp) != "0\n2\norders 3 60\nother.topic-x 0 0\n" || string(ls) != "0\n2\norders 3 21\nother.topic-x 0 0\n" {
		t.Fatalf("checkpoints %q %q", rp, ls)
	}
	if _, err := os.Stat(filepath.Join(dir, ".kafka_cleanshutdown")); err != nil {
		t.Fatal("no clean shutdown marker")
	}

	// Clean restart: recovery point used, log start restored.
	logger, lb := newLogger()
	m, err = OpenManager(dir, logger)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".kafka_cleanshutdown")); !os.IsNotExist(err) {
		t.Fatal("marker not removed on open")
	}
	if _, err := m.Open("orders", 3, [16]byte{1}, smallConfig()); err == nil || !strings.Contains(err.Error(), "topic ID") {
		t.Fatalf("topic ID mismatch accepted: %v", err)
	}
	l, err = m.Open("orders", 3, id, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 21 || l.LogEndOffset() != 60 || len(readAllBatches(t, l)) != 20 {
		t.Fatalf("reopened: start %d LEO %d", l.LogStartOffset(), l.LogEndOffset())
	}
	if strings.Contains(lb.String(), "level=WARN") {
		t.Fatalf("warnings on clean restart: %s", lb.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		m.RunBackground(ctx, BackgroundConfig{RetentionCheckMs: 1, FlushCheckMs: 1, HighWatermarkCheckpointMs: 1, ProducerExpirationCheckMs: 1, ProducerExpirationMs: 1 << 40})
		close(done)
	}()
	cancel()
	<-done
	if err := m.Delete("orders", 3); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete("other.topic-x", 0); err != nil {
		t.Fatal(err)
	}
	if ex, _ := m.Existing(); len(ex) != 0 {
		t.Fatalf("after delete %v", ex)
	}
	m.Close()
}

// TestManagerUncleanRestart: without the clean-shutdown marker every segment is
// recovered, so a corrupt segment below the old recovery point is still cut.
func TestManagerUncleanRestart(t *testing.T) {
	dir := t.TempDir()
	m, _ := OpenManager(dir, quietLogger())
	l, _ := m.Open("t", 0, [16]byte{1}, smallConfig())
	for i := 0; i < 30; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 2, valueSize: 50}), 0)
	}
	m.Close()
	os.Remove(filepath.Join(dir, ".kafka_cleanshutdown"))
	segs := segmentFiles(t, filepath.Join(dir, "t-0"), ".log")
	data, _ := os.ReadFile(segs[0])
	data[100] ^= 1
	os.WriteFile(segs[0], data, 0o644)
	logger, lb := newLogger()
	m, _ = OpenManager(dir, logger)
	defer m.Close()
	l, err := m.Open("t", 0, [16]byte{1}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 0 || !strings.Contains(lb.String(), "cutting corrupt log tail") {
		t.Fatalf("LEO %d, log %s", l.LogEndOffset(), lb.String())
	}
}

// TestManagerLogStartDurableBeforeClose: a log start offset advanced by
// AdvanceLogStartOffset (DeleteRecords) is in log-start-offset-checkpoint when the call
// returns, so a log directory opened again without Close (a crash) starts there and
// serves none of the records below it.
func TestManagerLogStartDurableBeforeClose(t *testing.T) {
	dir := t.TempDir()
	m, l := openManaged(t, dir, smallConfig())
	for i := 0; i < 30; i++ {
		mustAppend(t, l, mkBatch(t, batchOpts{n: 2, valueSize: 50}), 0)
	}
	if err := l.AdvanceLogStartOffset(33); err != nil {
		t.Fatal(err)
	}
	if ls := string(mustRead(t, filepath.Join(dir, "log-start-offset-checkpoint"))); ls != "0\n1\nt 0 33\n" {
		t.Fatalf("log-start-offset-checkpoint after AdvanceLogStartOffset: %q", ls)
	}
	_ = m // abandoned without Close, as by kill -9
	m2, err := OpenManager(dir, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	l2, err := m2.Open("t", 0, l.topicID, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	if l2.LogStartOffset() != 33 {
		t.Fatalf("log start after an unclean restart %d, want 33", l2.LogStartOffset())
	}
	if bs := readAllBatches(t, l2); len(bs) == 0 || bs[0].BaseOffset() < 32 {
		t.Fatalf("records below the log start readable after the restart: first batch %v", bs)
	}
}
