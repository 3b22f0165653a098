package mirror

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// metadataEpoch is the leader epoch Metadata reports for partition 0 of topic: what a
// consumer validates its position against.
func metadataEpoch(t *testing.T, cl *kgo.Client, topic string) int32 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatalf("metadata %s: %v", topic, err)
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.Partition == 0 && p.ErrorCode == 0 {
				return p.LeaderEpoch
			}
		}
	}
	t.Fatalf("metadata %s: no partition 0", topic)
	return -1
}

// TestSourceEpochRaisedWithoutRecords (spec section 6, DLE ≥ SLE; issue 15): the source
// partition's leader epoch is raised three times without a record (what source leader
// changes on an idle partition do), each time above the destination's: the destination's
// leader epoch follows within a metadata refresh, although no batch carries the new
// epoch. A group offset committed on the source after the raises (offset 5, the source's
// current leader epoch, as a consumer reset to the log end commits it) is synced, the
// mirror fails over, and on the destination the epoch validates (OffsetForLeaderEpoch
// answers no truncation: an end offset at or past 5) and a consumer of the group reads
// exactly the records written after the failover.
func TestSourceEpochRaisedWithoutRecords(t *testing.T) {
	src, dst, scl, ed := mirroredPair(t, "se", 5, "m", "se")
	dcl := dst.client()
	ctx := context.Background()
	var sle int32
	for i := 0; i < 3; i++ {
		dle := metadataEpoch(t, dcl, "se")
		if err := src.b.BumpLeaderEpoch(ctx, "se", 0, dle+1); err != nil {
			t.Fatalf("raise the source leader epoch above %d: %v", dle, err)
		}
		sle = metadataEpoch(t, scl, "se")
		if sle <= dle {
			t.Fatalf("source leader epoch %d after the raise above %d", sle, dle)
		}
		var got int32
		eventually(t, func() string { return fmt.Sprintf("raise %d: destination leader epoch %d, source %d", i+1, got, sle) }, func() bool {
			got = metadataEpoch(t, dcl, "se")
			return got >= sle
		})
	}
	if n := len(sourceBatches(t, scl, "se", 0)); n != 1 {
		t.Fatalf("the source holds %d batches, want the one of the 5 records (the raises wrote none)", n)
	}

	commitOn(t, scl, "g", "se", 0, 5, sle, "")
	var committed kadm.OffsetResponse
	eventually(t, func() string {
		return fmt.Sprintf("destination committed offset %+v, want 5 at epoch %d", committed, sle)
	}, func() bool {
		os, err := kadm.NewClient(dcl).FetchOffsets(ctx, "g")
		if err != nil {
			return false
		}
		committed, _ = os.Lookup("se", 0)
		return committed.At == 5 && committed.LeaderEpoch == sle
	})

	ed.stopTopics("m", "se")
	if e, end := offsetForLeaderEpoch(t, dcl, "se", sle); e > sle || end < 5 {
		t.Fatalf("OffsetForLeaderEpoch(%d) on the destination = epoch %d end %d: a truncation below the committed offset 5", sle, e, end)
	}
	produceN(t, dcl, "se", 0, 100, 3)
	cl := dst.client(kgo.ConsumerGroup("g"), kgo.ConsumeTopics("se"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var vals []string
	for len(vals) < 3 {
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("the group resumed with %v on the destination, want the 3 records written after the failover", vals)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
	}
	if fmt.Sprint(vals) != "[100 101 102]" {
		t.Fatalf("the group read %v on the destination, want [100 101 102]", vals)
	}
}

// TestSourceBrokerDownStaysMirroring (issue 15: fetchers follow source leader changes
// without a FAILED state): the only source broker goes down for many fetch rounds — as a
// source leader does until its cluster moves the leadership — and the connection
// refusals are retried, never FAILED: the partition stays MIRRORING and catches up once
// the broker is back (on the same port).
func TestSourceBrokerDownStaysMirroring(t *testing.T) {
	src, _, _, ed := mirroredPair(t, "down", 5, "m", "down")
	r := ed.m.runner("m")
	src.stop()
	errsBefore := r.fetchErrors.Load()
	eventually(t, func() string {
		return fmt.Sprintf("%d fetch errors since the source went down", r.fetchErrors.Load()-errsBefore)
	}, func() bool {
		return r.fetchErrors.Load()-errsBefore >= 6 // twice the three connection errors that used to fail it
	})
	if d := ed.describe("m", "down")[0]; d.State != mirrorproto.StateMirroring {
		t.Fatalf("with the source broker down: %+v, want MIRRORING", d)
	}
	src.start()
	scl := src.client()
	produceN(t, scl, "down", 0, 5, 5)
	ed.waitCaughtUp(scl, "m", "down")
	if d := ed.describe("m", "down")[0]; d.State != mirrorproto.StateMirroring || d.DestinationOffset != 10 {
		t.Fatalf("after the source broker came back: %+v, want MIRRORING at 10", d)
	}
}
