package mirror

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFailbackMovesConsumers (spec section 16, truncation before exposure): a franz-go
// consumer reading the old primary A past the point where B took over keeps reading A
// through the failback. The truncation fences its leader epoch, so it looks its position
// up with OffsetForLeaderEpoch and continues at the divergence point with B's records:
// it neither starts over (auto.offset.reset after OFFSET_OUT_OF_RANGE) nor skips the
// records that land in the gap once A's log has grown back past its old position.
func TestFailbackMovesConsumers(t *testing.T) {
	a, b, acl, eb := mirroredPair(t, "orders", 10, "from-a", "orders")
	eb.pauseTopics("from-a", "orders")
	produceN(t, acl, "orders", 0, 10, 3) // the tail B never gets

	cons := a.client(kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var seen []int64
	readUntil := func(n int) {
		t.Helper()
		eventually(t, func() string { return fmt.Sprintf("consumer on A read offsets %v, want %d records", seen, n) }, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen = append(seen, r.Offset) })
			return len(seen) >= n
		})
	}
	readUntil(13)

	eb.stopTopics("from-a", "orders") // failover; B takes 5 records
	bcl := b.client()
	produceN(t, bcl, "orders", 0, 100, 5)
	ea := a.env()
	ea.createMirror("from-b", b.b.Addr())
	ea.startTopics("from-b", "orders")
	ea.waitCaughtUp(bcl, "from-b", "orders")
	if d := ea.describe("from-b", "orders")[0]; d.TruncatedOffset != 10 {
		t.Fatalf("failback truncation: %+v", d)
	}
	readUntil(18)
	want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 11, 12, 13, 14, 15} // B: MIRROR_PID_RESET at 10, its records at 11..15
	if fmt.Sprint(seen[:min(len(seen), len(want))]) != fmt.Sprint(want) || len(seen) != len(want) {
		t.Fatalf("offsets read on A: %v, want %v", seen, want)
	}
}
