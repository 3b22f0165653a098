package broker_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// createTopic creates a topic through kadm and fails the test on error.
func createTopic(t *testing.T, cl *kgo.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := kadm.NewClient(cl).CreateTopics(context.Background(), partitions, 1, configs, name)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp[name]; r.Err != nil {
		t.Fatalf("create %s: %v %s", name, r.Err, r.ErrMessage)
	}
}

// consumeN reads n records from topic, failing after a generous deadline.
func consumeN(t *testing.T, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", len(out), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// TestRoundTripEveryCodec: a default (idempotent) franz-go producer and a consumer
// round-trip 100,000 records over 8 partitions once per codec; every record comes back
// once, in order per partition.
func TestRoundTripEveryCodec(t *testing.T) {
	b := brokertest.Start(t, nil)
	codecs := map[string]kgo.CompressionCodec{"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	const n = 100000
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "rt-" + name
			createTopic(t, b.Client(), topic, 8, nil)
			p := b.Client(kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(topic))
			recs := make([]*kgo.Record, n)
			for i := range recs {
				recs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i % 1000)), Value: []byte(strconv.Itoa(i))}
			}
			if err := p.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			c := b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := consumeN(t, c, n)
			if len(got) != n {
				t.Fatalf("got %d records, want %d", len(got), n)
			}
			seen := make(map[int]bool, n)
			last := map[int32]int64{}
			lastVal := map[int32]int{}
			for _, r := range got {
				v, _ := strconv.Atoi(string(r.Value))
				if seen[v] {
					t.Fatalf("record %d consumed twice", v)
				}
				seen[v] = true
				if o, ok := last[r.Partition]; ok && r.Offset <= o {
					t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, o)
				}
				if lv, ok := lastVal[r.Partition]; ok && v <= lv {
					t.Fatalf("partition %d: value %d after %d (out of produce order)", r.Partition, v, lv)
				}
				last[r.Partition], lastVal[r.Partition] = r.Offset, v
			}
			if len(last) != 8 {
				t.Fatalf("records landed on %d partitions, want 8", len(last))
			}
		})
	}
}

// TestRestartKeepsRecordsAndOffsets: records survive a clean restart and offsets
// continue without a hole or a repeat.
func TestRestartKeepsRecordsAndOffsets(t *testing.T) {
	b := brokertest.Start(t, nil)
	createTopic(t, b.Client(), "restart", 1, nil)
	produce := func(from, to int) {
		cl := b.Client(kgo.DefaultProduceTopic("restart"))
		for i := from; i < to; i++ {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		cl.Close()
	}
	produce(0, 50)
	b.Restart()
	produce(50, 100)
	got := consumeN(t, b.Client(kgo.ConsumeTopics("restart"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), 100)
	for i, r := range got {
		if r.Offset != int64(i) || string(r.Value) != fmt.Sprint(i) {
			t.Fatalf("record %d: offset %d value %s", i, r.Offset, r.Value)
		}
	}
}

// TestProduceLargeBatchesConcurrently: four producers on their own connections send
// batches of about 256 KiB (request frames read into reused buffers) to one topic at the
// same time; every record comes back once with its exact value.
func TestProduceLargeBatchesConcurrently(t *testing.T) {
	b := brokertest.Start(t, nil)
	const topic, producers, perProducer = "big", 4, 2000
	createTopic(t, b.Client(), topic, 4, nil)
	value := func(p, i int) []byte {
		v := make([]byte, 1000)
		for j := range v {
			v[j] = byte(p*31 + i*7 + j)
		}
		return append(v, fmt.Sprintf("|%d|%d", p, i)...)
	}
	errs := make(chan error, producers)
	for p := range producers {
		go func() {
			cl := b.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(256<<10), kgo.ProducerLinger(5*time.Millisecond))
			recs := make([]*kgo.Record, perProducer)
			for i := range recs {
				recs[i] = &kgo.Record{Value: value(p, i)}
			}
			errs <- cl.ProduceSync(context.Background(), recs...).FirstErr()
		}()
	}
	for range producers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := consumeN(t, b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), producers*perProducer)
	seen := map[string]bool{}
	for _, r := range got {
		var p, i int
		tail := r.Value[1000:]
		if _, err := fmt.Sscanf(string(tail), "|%d|%d", &p, &i); err != nil {
			t.Fatalf("record at %s-%d@%d has a damaged tail %q", r.Topic, r.Partition, r.Offset, tail)
		}
		if string(r.Value) != string(value(p, i)) {
			t.Fatalf("record %d of producer %d came back changed", i, p)
		}
		if seen[string(tail)] {
			t.Fatalf("record %d of producer %d came back twice", i, p)
		}
		seen[string(tail)] = true
	}
	if len(seen) != producers*perProducer {
		t.Fatalf("%d distinct records, want %d", len(seen), producers*perProducer)
	}
}
