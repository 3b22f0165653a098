package mirror

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// TestSourceOffsetsWhilePaused is the operator trial of a paused mirror (spec section
// 13, sync_offsets.go): on two kmirror brokers a topic is mirrored and paused, then the
// source takes n more records. Describe (and the lag metric, through Stats) must report
// the source's HW and lag n for the PAUSED partition — not the "lag 0" of the last fetch,
// which an operator failing over would read as "nothing lost" — while the destination
// LEO stays put. Deleting the source topic afterwards (the partition goes FAILED
// non-retryable) leaves the last figures as they were.
func TestSourceOffsetsWhilePaused(t *testing.T) {
	const before, n = 10, 25
	_, dst, scl, ed := mirroredPair(t, "orders", before, "m", "orders")
	ed.pauseTopics("m", "orders")
	ed.waitState("m", "orders", mirrorproto.StatePaused)

	produceN(t, scl, "orders", 0, before, n)
	end := sourceEnds(t, scl, "orders")[0]
	if end != before+n {
		t.Fatalf("source HW %d, want %d", end, before+n)
	}
	var d mirrorproto.DescribeClusterMirrorsResponsePartition
	eventually(t, func() string { return fmt.Sprintf("source HW %d, describe %+v", end, d) }, func() bool {
		d = ed.describe("m", "orders")[0]
		return d.SourceOffset == end
	})
	if d.State != mirrorproto.StatePaused || d.Lag != n || d.DestinationOffset != before {
		t.Fatalf("paused partition: want PAUSED, lag %d, destination offset %d: %+v", n, before, d)
	}
	if leo := ed.localLog("orders", 0).LogEndOffset(); leo != before {
		t.Fatalf("the paused partition's LEO moved from %d to %d", before, leo)
	}
	statLag := int64(-2)
	for _, st := range dst.m.Stats() {
		if st.Mirror == "m" && st.Topic == "orders" && st.Partition == 0 {
			statLag = st.Lag
		}
	}
	if statLag != n {
		t.Fatalf("kmirror_mirror_partition_lag_records source: Stats lag %d, want %d", statLag, n)
	}

	// the source topic gone: FAILED non-retryable, and the last figures stay
	if rs, err := kadm.NewClient(scl).DeleteTopics(context.Background(), "orders"); err != nil || rs["orders"].Err != nil {
		t.Fatalf("delete the source topic: %v %+v", err, rs)
	}
	ed.waitState("m", "orders", mirrorproto.StateFailed)
	waitSynced(t, dst, "m", TaskSourceOffsets)
	if d := ed.describe("m", "orders")[0]; d.SourceOffset != end || d.Lag != n || d.DestinationOffset != before {
		t.Fatalf("after the source topic was deleted: want source offset %d, lag %d: %+v", end, n, d)
	}
}

// TestSourceOffsetsWhileFailed: a partition whose retries ran out (every fetch answered
// CORRUPT_MESSAGE) stays FAILED and is no longer fetched; its lag must still follow the
// source (the sync task asks for the HW with ListOffsets, which the fault leaves alone).
func TestSourceOffsetsWhileFailed(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(1, "flaky"))
	addrs := c.ListenAddrs()
	produce(t, addrs, "flaky", 10)
	e := newEnv(t)
	e.createMirror("m1", addrs[0], "fetch.wait.max.ms", "50") // quick retry rounds
	e.startTopics("m1", "flaky")
	e.waitCaughtUp(src, "m1", "flaky")

	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "flaky", Err: kerr.CorruptMessage, Count: -1})
	defer h.Remove()
	produce(t, addrs, "flaky", 10)
	maxA := fastConfig().RetryMaxAttempts
	var d mirrorproto.DescribeClusterMirrorsResponsePartition
	eventually(t, func() string { return fmt.Sprintf("flaky: %+v", d) }, func() bool {
		d = e.describe("m1", "flaky")[0]
		return d.State == mirrorproto.StateFailed && d.RetryAttempt >= maxA
	})
	leo := d.DestinationOffset

	produce(t, addrs, "flaky", 15)
	end := sourceEnds(t, src, "flaky")[0]
	eventually(t, func() string { return fmt.Sprintf("source HW %d, describe %+v", end, d) }, func() bool {
		d = e.describe("m1", "flaky")[0]
		return d.SourceOffset == end
	})
	if d.State != mirrorproto.StateFailed || d.DestinationOffset != leo || d.Lag != end-leo || d.Lag < 15 {
		t.Fatalf("FAILED partition: want destination offset %d, lag %d: %+v", leo, end-leo, d)
	}
}

// TestStoppedKeepsSourceOffsetAcrossRestart: a partition failed over while paused, with
// records on the source it never mirrored, still reports the source offset it knew at
// the failover after the destination restarts (describe and the lag metric), instead of
// "-": the figure the operator reads as what the failover left behind.
func TestStoppedKeepsSourceOffsetAcrossRestart(t *testing.T) {
	_, dst, scl, ed := mirroredPair(t, "t", 10, "m", "t")
	ed.pauseTopics("m", "t")
	produceN(t, scl, "t", 0, 10, 5)
	eventually(t, func() string { return fmt.Sprintf("paused partition: %+v", ed.describe("m", "t")) }, func() bool {
		return ed.describe("m", "t")[0].SourceOffset == 15
	})
	ed.stopTopics("m", "t")
	produceN(t, dst.client(), "t", 0, 100, 3) // the new primary's own writes
	before := ed.describe("m", "t")[0]
	if before.SourceOffset != 15 || before.Lag != 5 {
		t.Fatalf("after the failover: source offset %d lag %d, want 15 and 5 (the records left unmirrored)", before.SourceOffset, before.Lag)
	}
	dst.stop()
	dst.start()
	ed = dst.env()
	after := ed.describe("m", "t")[0]
	if after.State != mirrorproto.StateStopped || after.SourceOffset != before.SourceOffset || after.Lag != before.Lag {
		t.Fatalf("after a restart: source offset %d lag %d (%s), want %d and %d", after.SourceOffset, after.Lag, after.State, before.SourceOffset, before.Lag)
	}
}
