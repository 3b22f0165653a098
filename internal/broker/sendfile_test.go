package broker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// stressValue is the value of record seq with key: the key, the sequence number and a
// filler derived from both, so a consumer can check every byte it receives.
func stressValue(key string, seq int) []byte {
	head := fmt.Sprintf("%s|%d|", key, seq)
	v := []byte(head)
	for i := 0; len(v) < 200+seq%300; i++ {
		v = append(v, byte('a'+(seq*7+i+len(key))%26))
	}
	return v
}

// checkStressRecord verifies one consumed record against stressValue.
func checkStressRecord(r *kgo.Record) error {
	if string(r.Key) == "end" {
		return nil
	}
	f := strings.SplitN(string(r.Value), "|", 3)
	if len(f) != 3 || f[0] != string(r.Key) {
		return fmt.Errorf("offset %d: value %.40q does not start with its key %q", r.Offset, r.Value, r.Key)
	}
	seq, err := strconv.Atoi(f[1])
	if err != nil || !bytes.Equal(r.Value, stressValue(f[0], seq)) {
		return fmt.Errorf("offset %d: value of key %q seq %q damaged", r.Offset, r.Key, f[1])
	}
	return nil
}

// TestFetchSendfileStress: franz-go consumers read a compacted topic with small
// segments while it is produced to, compacted (segments swapped), truncated (the
// segment a fetch range points into cut, later segments deleted) and has its log start
// advanced (segments deleted), so that file ranges of in-flight Fetch responses outlive
// their segments. Every record read must be intact; every consumer reaches the final
// record. Run under -race.
func TestFetchSendfileStress(t *testing.T) {
	b := brokertest.Start(t, nil)
	admin := b.Client()
	one := "1"
	createTopic(t, admin, "stress", 1, map[string]*string{
		"cleanup.policy":            strPtr("compact"),
		"segment.bytes":             strPtr("16384"),
		"min.cleanable.dirty.ratio": strPtr("0.01"),
		"index.interval.bytes":      &one,
	})
	l, err := b.Log("stress", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const consumers = 3
	var wg sync.WaitGroup
	errs := make(chan error, consumers+2)
	read := make([]int, consumers)
	for i := range consumers {
		opts := []kgo.Opt{kgo.ConsumeTopics("stress"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxBytes(64 << 10), kgo.FetchMaxPartitionBytes(int32(8<<10) * int32(i+1)), kgo.FetchMaxWait(50 * time.Millisecond)}
		if i == 2 {
			opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		}
		c := b.Client(opts...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := c.PollFetches(ctx)
				if ctx.Err() != nil {
					return
				}
				var ferr error
				fs.EachError(func(_ string, _ int32, err error) {
					var loss *kgo.ErrDataLoss
					if !errors.As(err, &loss) && ferr == nil { // data loss: truncation, expected
						ferr = err
					}
				})
				if ferr != nil {
					errs <- fmt.Errorf("consumer %d: %w", i, ferr)
					return
				}
				for _, r := range fs.Records() {
					if err := checkStressRecord(r); err != nil {
						errs <- fmt.Errorf("consumer %d: %w", i, err)
						return
					}
					read[i]++
					if string(r.Key) == "end" {
						return
					}
				}
			}
		}()
	}

	p := b.Client(kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("stress"), kgo.ProducerLinger(0))
	seq := 0
	const rounds = 60
	for round := range rounds {
		recs := make([]*kgo.Record, 0, 100)
		for range 100 {
			key := "k" + strconv.Itoa(seq%40)
			recs = append(recs, &kgo.Record{Key: []byte(key), Value: stressValue(key, seq)})
			seq++
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		switch round % 4 {
		case 0:
			if _, err := l.Clean(time.Now().UnixMilli(), true); err != nil {
				t.Fatalf("round %d: clean: %v", round, err)
			}
		case 1:
			if err := l.TruncateTo(l.LogEndOffset() - int64(1+seq%150)); err != nil {
				t.Fatalf("round %d: truncate: %v", round, err)
			}
		case 2:
			if err := l.TruncateTo(l.LogEndOffset() - 3); err != nil {
				t.Fatalf("round %d: truncate: %v", round, err)
			}
		case 3:
			if round%8 == 7 {
				if err := l.AdvanceLogStartOffset(l.LogStartOffset() + (l.LogEndOffset()-l.LogStartOffset())/4); err != nil {
					t.Fatalf("round %d: advance log start: %v", round, err)
				}
			}
		}
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte("end"), Value: []byte("end")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errs:
		cancel()
		<-done
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	for i, n := range read {
		if n < 2 {
			t.Errorf("consumer %d read %d records", i, n)
		}
	}
	t.Logf("records read per consumer: %v (log %d..%d)", read, l.LogStartOffset(), l.LogEndOffset())
}

func strPtr(s string) *string { return &s }

// TestKcatConsumesFileRanges: librdkafka (kcat) consumes records served as file
// ranges over many segments and partitions, every value intact, read_uncommitted and
// read_committed.
func TestKcatConsumesFileRanges(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed; run `make deps`")
	}
	b := brokertest.Start(t, nil)
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(t, cl, "kr", 3, map[string]*string{"segment.bytes": strPtr("65536")})
	const n = 3000
	want := map[string]string{}
	var recs []*kgo.Record
	for i := range n {
		key := "key-" + strconv.Itoa(i)
		v := string(stressValue(key, i))
		want[key] = v
		recs = append(recs, &kgo.Record{Topic: "kr", Partition: int32(i % 3), Key: []byte(key), Value: []byte(v)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if l, err := b.Log("kr", 0); err != nil || l.Size() < 4*65536 {
		t.Fatalf("partition 0 should span several segments: %v", err)
	}
	for _, iso := range []string{"read_uncommitted", "read_committed"} {
		out := kcat(t, "", "-b", b.Addr(), "-C", "-t", "kr", "-e", "-q", "-X", "isolation.level="+iso,
			"-X", "message.max.bytes=100000", "-X", "fetch.max.bytes=200000", "-X", "max.partition.fetch.bytes=50000", "-f", "%k %s\n")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != n {
			t.Fatalf("%s: kcat read %d records, want %d", iso, len(lines), n)
		}
		for _, line := range lines {
			k, v, _ := strings.Cut(line, " ")
			if want[k] != v {
				t.Fatalf("%s: record %s: got %.40q", iso, k, v)
			}
		}
	}
}
