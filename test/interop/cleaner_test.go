package interop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// cleanedView reads partition 0 of topic from its log start to its end with the given
// isolation level and returns "offset key=value" for every record.
func cleanedView(t *testing.T, addr, topic string, iso kgo.IsolationLevel) []string {
	t.Helper()
	end := endOffsets(t, newClient(t, addr), topic)[0]
	cl := newClient(t, addr, kgo.FetchIsolationLevel(iso),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for last := int64(-1); last < end-1; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s at %s: read up to %d of %d", topic, addr, last, end)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, fmt.Sprintf("%d %s=%s", r.Offset, r.Key, r.Value))
			last = r.Offset
		})
	}
	return out
}

// TestCleanerMatchesApacheKafka: the same transactional input (committed and aborted
// transactions over the same keys, then plain records) written to a compacted topic on
// Apache Kafka and on kmirror, cleaned by both log cleaners, reads the same with
// read_uncommitted and with read_committed: offsets, keys and values. Kafka's cleaner
// removes the aborted transactions' records (its CleanedTransactionMetadata); kmirror's
// cleaner used to keep them, so a read_uncommitted consumer saw them on kmirror only.
func TestCleanerMatchesApacheKafka(t *testing.T) {
	src := kafkaSource(t)
	dst := brokertest.Start(t, map[string]string{"log.cleaner.backoff.ms": "200"})
	const topic = "cleaned-txn"
	write := func(addr string) {
		cl := newClient(t, addr)
		createTopic(t, cl, topic, 1, map[string]string{"cleanup.policy": "compact", "segment.ms": "100",
			"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100", "min.compaction.lag.ms": "0"})
		tcl := newClient(t, addr, kgo.TransactionalID("cleaner-"+strings.ReplaceAll(addr, ":", "-")))
		for round := range 6 {
			commit := round%3 != 1
			if err := tcl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			var vals []string
			for k := range 4 {
				vals = append(vals, fmt.Sprintf("round-%d-commit-%v-%d", round, commit, k))
			}
			produce(t, tcl, topic, 0, vals...)
			if err := tcl.EndTransaction(ctxT(t), kgo.TransactionEndTry(commit)); err != nil {
				t.Fatalf("%s: end transaction %d: %v", addr, round, err)
			}
			time.Sleep(300 * time.Millisecond) // older than segment.ms: the next append rolls
		}
		produce(t, cl, topic, 0, "plain-0", "plain-1")
		time.Sleep(300 * time.Millisecond)
		produce(t, cl, topic, 0, "roll") // the data above is now in inactive segments
	}
	write(src.Addr)
	write(dst.Addr())

	// Both cleaners have cleaned every inactive segment once no aborted record is left
	// and the two read the same (a hang guard: the same rules converge on one result).
	cleaned := func(view []string) bool {
		for _, r := range view {
			if strings.Contains(r, "commit-false") {
				return false
			}
		}
		return true
	}
	var kv, mv []string
	eventually(t, func() string {
		return fmt.Sprintf("read_uncommitted after cleaning differs:\nApache Kafka: %v\nkmirror:      %v", kv, mv)
	}, func() bool {
		kv = cleanedView(t, src.Addr, topic, kgo.ReadUncommitted())
		mv = cleanedView(t, dst.Addr(), topic, kgo.ReadUncommitted())
		return cleaned(kv) && slices.Equal(kv, mv)
	})
	kc, mc := cleanedView(t, src.Addr, topic, kgo.ReadCommitted()), cleanedView(t, dst.Addr(), topic, kgo.ReadCommitted())
	if !slices.Equal(kc, mc) {
		t.Fatalf("read_committed after cleaning differs:\nApache Kafka: %v\nkmirror:      %v", kc, mc)
	}
}
