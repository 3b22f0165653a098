package quickstart

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Names used by the quickstart.
const (
	Topic          = "orders"         // the demo topic, Partitions partitions on the source
	Partitions     = 6                // partitions of Topic
	Group          = "orders-app"     // the consumer group reading Topic
	Mirror         = "my-mirror"      // the mirror on the destination, source → destination
	MirrorBack     = "my-mirror-back" // the failback mirror on the source, destination → source
	keyPrefix      = "order-"
	recordsPerPoll = 1 * time.Second
)

// orderRecord is record n of the demo workload: key order-n, a small JSON value.
func orderRecord(n int) *kgo.Record {
	return &kgo.Record{Topic: Topic, Key: []byte(keyPrefix + strconv.Itoa(n)),
		Value: []byte(fmt.Sprintf(`{"order":%d,"item":"widget","qty":%d}`, n, n%5+1))}
}

// orderNumber returns n of key order-n, or -1.
func orderNumber(key []byte) int {
	n, err := strconv.Atoi(strings.TrimPrefix(string(key), keyPrefix))
	if err != nil || !strings.HasPrefix(string(key), keyPrefix) {
		return -1
	}
	return n
}

func newProducer(addr string) (*kgo.Client, error) {
	return kgo.NewClient(seeds(addr), kgo.DefaultProduceTopic(Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.DialTimeout(2*time.Second), kgo.RecordDeliveryTimeout(20*time.Second))
}

// produceRange writes records from..to (inclusive) and waits for every ack.
func produceRange(ctx context.Context, cl *kgo.Client, from, to int) error {
	recs := make([]*kgo.Record, 0, to-from+1)
	for n := from; n <= to; n++ {
		recs = append(recs, orderRecord(n))
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// consumed is what a consumer group member read: order numbers in arrival order.
type consumed []int

// consumeGroup joins Group on addr, reads until want(seen) holds or timeout passes,
// commits what it read, and leaves the group. A group with no committed offset starts
// at the earliest offset.
func consumeGroup(ctx context.Context, addr string, timeout time.Duration, want func(consumed) bool) (consumed, error) {
	cl, err := kgo.NewClient(seeds(addr), kgo.ConsumerGroup(Group), kgo.ConsumeTopics(Topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DialTimeout(2*time.Second), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var seen consumed
	deadline := time.Now().Add(timeout)
	for !want(seen) {
		if time.Now().After(deadline) {
			return seen, fmt.Errorf("group %s on %s read %d records in %s, not all expected", Group, addr, len(seen), timeout)
		}
		pctx, cancel := context.WithTimeout(ctx, recordsPerPoll)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return seen, ctx.Err()
		}
		fs.EachRecord(func(r *kgo.Record) { seen = append(seen, orderNumber(r.Key)) })
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cl.CommitUncommittedOffsets(cctx); err != nil {
		return seen, fmt.Errorf("commit on %s: %w", addr, err)
	}
	lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
	defer lcancel()
	_ = cl.LeaveGroupContext(lctx)
	return seen, nil
}

// dumpTopic reads every record of Topic on addr as "partition offset key value" lines,
// sorted, up to each partition's high watermark at the time of the call.
func dumpTopic(ctx context.Context, addr string) ([]string, error) {
	acl, err := kgo.NewClient(seeds(addr), kgo.DialTimeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(acl).ListEndOffsets(ctx, Topic)
	acl.Close()
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, err
	}
	want := map[int32]int64{}
	parts := map[string]map[int32]kgo.Offset{Topic: {}}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			parts[Topic][o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	var lines []string
	if len(want) == 0 {
		return lines, nil
	}
	cl, err := kgo.NewClient(seeds(addr), kgo.ConsumePartitions(parts), kgo.DialTimeout(2*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	deadline := time.Now().Add(30 * time.Second)
	for len(want) > 0 {
		if time.Now().After(deadline) {
			return lines, fmt.Errorf("reading %s on %s: partitions %v not read to their end within 30 s", Topic, addr, want)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return lines, ctx.Err()
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				lines = append(lines, fmt.Sprintf("%d %d %s %s", r.Partition, r.Offset, r.Key, r.Value))
			}
			if r.Offset == end-1 {
				delete(want, r.Partition)
			}
		})
	}
	sort.Slice(lines, func(i, j int) bool {
		var pi, oi, pj, oj int64
		fmt.Sscan(lines[i], &pi, &oi)
		fmt.Sscan(lines[j], &pj, &oj)
		if pi != pj {
			return pi < pj
		}
		return oi < oj
	})
	return lines, nil
}
