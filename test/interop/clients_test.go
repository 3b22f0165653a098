package interop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/record"
)

// newClient returns a client seeded with addr (host:port, or a comma-separated list of
// them), closed when the test ends.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(addr, ",")...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds, failing with what() after a generous bound (a hang
// guard, not a timing assertion).
func eventually(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition never held: %s", what())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func createTopic(t *testing.T, cl *kgo.Client, name string, partitions int32, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctxT(t), partitions, 1, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// manualPartitions makes a client honor kgo.Record.Partition, as produce needs.
var manualPartitions = kgo.RecordPartitioner(kgo.ManualPartitioner())

// produce writes values (key "k<i>") to topic partition p synchronously; cl must be built
// with manualPartitions when the topic has more than one partition.
func produce(t *testing.T, cl *kgo.Client, topic string, p int32, values ...string) {
	t.Helper()
	var recs []*kgo.Record
	for i, v := range values {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s/%d: %v", topic, p, err)
	}
}

// topicMeta is a topic's ID and partition count from a Metadata response.
type topicMeta struct {
	ID         [16]byte
	Partitions int32
}

func metadata(t *testing.T, cl *kgo.Client, topics ...string) map[string]topicMeta {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	out := map[string]topicMeta{}
	for _, tp := range resp.Topics {
		if tp.ErrorCode != 0 || tp.Topic == nil {
			continue
		}
		out[*tp.Topic] = topicMeta{ID: tp.TopicID, Partitions: int32(len(tp.Partitions))}
	}
	return out
}

// partitionLog is what a raw Fetch shows of one partition: every whole batch from the log
// start offset to the high watermark, the aborted transactions (read_committed view), and
// the offsets the broker reports.
type partitionLog struct {
	Batches        []record.Batch
	LogStartOffset int64
	HighWatermark  int64
	LastStable     int64
	Aborted        []kmsg.FetchResponseTopicPartitionAbortedTransaction
}

// fetchAll reads a partition with raw Fetch requests (read_committed, so the aborted
// transaction list is returned) from its log start offset to its high watermark.
func fetchAll(t *testing.T, cl *kgo.Client, topic string, id [16]byte, p int32) partitionLog {
	t.Helper()
	var out partitionLog
	starts, err := kadm.NewClient(cl).ListStartOffsets(ctxT(t), topic)
	if err != nil {
		t.Fatalf("list start offsets %s: %v", topic, err)
	}
	so, _ := starts.Lookup(topic, p)
	if so.Err != nil {
		t.Fatalf("list start offset %s/%d: %v", topic, p, so.Err)
	}
	offset := so.Offset
	for {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = 0
		req.MinBytes = 1
		req.MaxBytes = 4 << 20
		req.IsolationLevel = 1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rp.FetchOffset = offset
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = 1 << 20
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxT(t), cl)
		if err != nil {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch %s/%d: response shape %+v", topic, p, resp)
		}
		rpr := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rpr.ErrorCode); err != nil {
			t.Fatalf("fetch %s/%d at %d: %v", topic, p, offset, err)
		}
		out.LogStartOffset, out.HighWatermark, out.LastStable = rpr.LogStartOffset, rpr.HighWatermark, rpr.LastStableOffset
		out.Aborted = append(out.Aborted, rpr.AbortedTransactions...)
		buf := rpr.RecordBatches
		n := 0
		for {
			b, rest, err := record.Next(buf)
			if err != nil {
				break
			}
			buf = rest
			if b.NextOffset() <= offset {
				continue
			}
			out.Batches = append(out.Batches, append(record.Batch(nil), b...))
			offset = b.NextOffset()
			n++
		}
		if offset >= rpr.HighWatermark || n == 0 && offset >= rpr.LastStableOffset {
			return out
		}
		if n == 0 {
			t.Fatalf("fetch %s/%d at %d: no whole batch below HW %d", topic, p, offset, rpr.HighWatermark)
		}
	}
}

// endOffsets lists the log end offsets (latest) of every partition of topic.
func endOffsets(t *testing.T, cl *kgo.Client, topic string) map[int32]int64 {
	t.Helper()
	lo, err := kadm.NewClient(cl).ListEndOffsets(ctxT(t), topic)
	if err != nil {
		t.Fatalf("list end offsets %s: %v", topic, err)
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("list end offsets %s/%d: %v", topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms) }

func sortStrings(s []string) { slices.Sort(s) }

// deleteRecords moves the log start offset of topic/p to before (DeleteRecords).
func deleteRecords(t *testing.T, cl *kgo.Client, topic string, p int32, before int64) {
	t.Helper()
	o := kadm.Offsets{}
	o.AddOffset(topic, p, before, -1)
	resp, err := kadm.NewClient(cl).DeleteRecords(ctxT(t), o)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete records %s/%d before %d: %v", topic, p, before, err)
	}
}

func kadmClient(cl *kgo.Client) *kadm.Client { return kadm.NewClient(cl) }
