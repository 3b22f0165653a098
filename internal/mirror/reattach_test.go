package mirror

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// TestStartPatternLeavesStoppedTopics: after a failover on D, a start pattern meant to
// add a new topic leaves the failed-over topic alone (it is the primary now, with writes
// the source never had); naming it exactly re-attaches it, and LOG_ALIGNMENT then keeps
// what D mirrored up to its own failover instead of truncating to 0.
func TestStartPatternLeavesStoppedTopics(t *testing.T) {
	_, d, ccl, ed := mirroredPair(t, "t1", 10, "mm", ".*")
	dcl := d.client()
	ed.stopTopics("mm", "t1") // failover
	produceN(t, dcl, "t1", 0, 0, 5)
	before := d.log("t1", 0)

	createTopicOn(t, ccl, "t2", 1)
	produceN(t, ccl, "t2", 0, 0, 3)
	ed.startTopics("mm", ".*") // meant to add t2
	ed.waitCaughtUp(ccl, "mm", "t2")
	if tt := d.b.Metadata().Image().Topics["t1"]; tt.Mirror == nil || tt.Mirror.Desired != metadata.DesiredStopped {
		t.Fatalf("t1 after the pattern start: %+v", tt.Mirror)
	}
	if ok, msg := d.m.CheckWrite("t1", 0, OpProduce); !ok {
		t.Fatalf("t1 must stay writable: %s", msg)
	}
	sameBatches(t, "t1 on D after the pattern start", before, d.log("t1", 0))

	// the exact name re-attaches it: back to D's own last mirror position, offset 10
	ed.startTopics("mm", "t1")
	ed.waitCaughtUp(ccl, "mm", "t1")
	sameBatches(t, "t1 on D after re-attaching", sourceBatches(t, ccl, "t1", 0), d.log("t1", 0))
	p := ed.describe("mm", "t1")[0]
	if p.TruncatedOffset != 10 || p.TruncatedRecords != 6 { // 5 records + MIRROR_PID_RESET
		t.Fatalf("truncation report: truncated to %d, %d records; want 10 and 6", p.TruncatedOffset, p.TruncatedRecords)
	}
}

// TestStartRefusesLoop: starting a topic that the source mirrors from this cluster is
// refused at once with the reason, and a pattern leaves it out; the topic stays an
// ordinary writable topic with its log untouched.
func TestStartRefusesLoop(t *testing.T) {
	a, b, _, _ := mirroredPair(t, "orders", 1, "from-a", "orders")
	before := a.log("orders", 0)

	ea := a.env()
	ea.createMirror("from-b", b.b.Addr())
	resp := ea.startResp("from-b", "orders")
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != mirrorproto.InvalidClusterMirrorStates ||
		resp.Topics[0].ErrorMessage == nil || !strings.Contains(*resp.Topics[0].ErrorMessage, "mirror loop") {
		t.Fatalf("start of a looping topic: %+v", resp)
	}
	if resp := ea.startResp("from-b", ".*"); resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Fatalf("pattern start: %+v", resp)
	}
	if tt := a.b.Metadata().Image().Topics["orders"]; tt.Mirror != nil {
		t.Fatalf("orders became a mirror topic on A: %+v", tt.Mirror)
	}
	if ok, msg := a.m.CheckWrite("orders", 0, OpProduce); !ok {
		t.Fatalf("orders must stay writable on A: %s", msg)
	}
	sameBatches(t, "orders on A", before, a.log("orders", 0))
}

// TestDiscoverySkipsLoop: after a switchover both clusters' mirrors carry the same
// include pattern; a topic deleted on the primary A, which B still mirrors from A, is not
// rediscovered on A from B (that would bring it back read-only and make a loop).
func TestDiscoverySkipsLoop(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	acl := a.client()
	createTopicOn(t, acl, "app.new", 1)
	produceN(t, acl, "app.new", 0, 0, 2)
	eb := b.env()
	eb.createMirror("from-a", a.b.Addr(), "topics.include", `app\..*`)
	eb.startTopics("from-a", `app\..*`)
	eb.waitCaughtUp(acl, "from-a", "app.new")
	ea := a.env()
	ea.createMirror("from-b", b.b.Addr(), "topics.include", `app\..*`)
	waitSynced(t, a, "from-b", TaskTopicDiscovery)

	if _, err := kadm.NewClient(acl).DeleteTopics(context.Background(), "app.new"); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string { return "app.new still on A" }, func() bool { return a.b.Metadata().Image().Topics["app.new"] == nil })
	waitSynced(t, a, "from-b", TaskTopicDiscovery)
	waitSynced(t, a, "from-b", TaskTopicDiscovery)
	if tt := a.b.Metadata().Image().Topics["app.new"]; tt != nil {
		t.Fatalf("app.new rediscovered on A from B: %+v", tt.Mirror)
	}
}

// TestDiscoveryStopsOnClusterIDChange: once the source answers with another cluster ID
// (wiped and restarted), topic discovery creates nothing and reports the change.
func TestDiscoveryStopsOnClusterIDChange(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	acl := a.client()
	createTopicOn(t, acl, "app.one", 1)
	eb := b.env()
	eb.createMirror("from-a", a.b.Addr(), "topics.include", `app\..*`)
	eventually(t, func() string { return "app.one not discovered" }, func() bool { return b.b.Metadata().Image().Topics["app.one"] != nil })

	a.stop()
	a.props["log.dirs"] = t.TempDir() // a new, empty cluster on the same address
	a.start()
	createTopicOn(t, a.client(), "app.two", 3)
	waitSyncError(t, b, "from-a", TaskTopicDiscovery, "cluster ID changed")
	waitSyncError(t, b, "from-a", TaskTopicConfigs, "cluster ID changed") // no configs copied from it either
	if tt := b.b.Metadata().Image().Topics["app.two"]; tt != nil {
		t.Fatalf("app.two discovered from a cluster with another ID: %+v", tt)
	}
}

// waitSyncError waits until task of mirror on kb reports a failed run whose error
// contains want.
func waitSyncError(t *testing.T, kb *kbroker, mirror, task, want string) {
	t.Helper()
	eventually(t, func() string { return mirror + " " + task + ": no error containing " + want }, func() bool {
		r := kb.m.runner(mirror)
		if r == nil {
			return false
		}
		for _, st := range r.status.snapshot() {
			if st.Task == task && st.LastError != nil && strings.Contains(*st.LastError, want) {
				return true
			}
		}
		return false
	})
}

// TestStopBeforeAlignmentKeepsPosition: a failed-over topic re-attached by name whose
// LOG_ALIGNMENT cannot finish (the source is down: FAILED) and that is stopped again
// keeps the last mirror position of its first failover. Its log holds this cluster's own
// writes; recording its end as the position would make the next re-attach keep them as
// if they were the source's (a review found that).
func TestStopBeforeAlignmentKeepsPosition(t *testing.T) {
	c, d, ccl, ed := mirroredPair(t, "t1", 10, "mm", "t1")
	ed.stopTopics("mm", "t1")
	produceN(t, d.client(), "t1", 0, 0, 5)
	if p := ed.describe("mm", "t1")[0]; p.LastMirrorOffset != 10 {
		t.Fatalf("first failover: last mirror offset %d, want 10", p.LastMirrorOffset)
	}

	c.stop()
	tt := d.b.Metadata().Image().Topics["t1"]
	st := &sourceTopic{name: "t1", id: tt.Mirror.SourceTopicID, partitions: make([]kmsg.MetadataResponseTopicPartition, tt.Partitions)}
	if err := d.m.startTopic(context.Background(), "mm", st, nil); err != nil { // StartMirrorTopics needs the source up
		t.Fatal(err)
	}
	d.m.reconcile()
	ed.waitState("mm", "t1", mirrorproto.StateFailed)
	ed.stopTopics("mm", "t1")
	if p := ed.describe("mm", "t1")[0]; p.LastMirrorOffset != 10 {
		t.Fatalf("stopped before alignment: last mirror offset %d, want the first failover's 10", p.LastMirrorOffset)
	}

	c.start()
	ed.startTopics("mm", "t1")
	ed.waitCaughtUp(ccl, "mm", "t1")
	sameBatches(t, "t1 on D after re-attaching", sourceBatches(t, ccl, "t1", 0), d.log("t1", 0))
}

// TestPartitionsAddedAfterFailover: partitions an operator adds to a failed-over (STOPPED)
// topic are empty partitions, as Kafka's CreatePartitions makes them: STOPPED, nothing in
// the log (no MIRROR_PID_RESET at offset 0, which Kafka's tools would count as a record of
// lag), and the first produced record lands at offset 0. Their leader epoch is raised
// like a failover's (10), so their writes never share an epoch with source batches.
func TestPartitionsAddedAfterFailover(t *testing.T) {
	_, d, _, ed := mirroredPair(t, "grow", 5, "mm", "grow")
	ed.stopTopics("mm", "grow")
	dcl := d.client()
	if rs, err := kadm.NewClient(dcl).CreatePartitions(context.Background(), 1, "grow"); err != nil || rs["grow"].Err != nil {
		t.Fatalf("CreatePartitions on the failed-over topic: %v %+v", err, rs)
	}
	eventually(t, func() string { return fmt.Sprintf("partition grow-1 not STOPPED: %+v", ed.describe("mm", "grow")) }, func() bool {
		ps := ed.describe("mm", "grow")
		return len(ps) == 2 && ps[1].State == mirrorproto.StateStopped
	})
	l := ed.localLog("grow", 1)
	if l.LogEndOffset() != 0 || l.LeaderEpoch() != epochRaiseMargin {
		t.Fatalf("added partition: LEO %d, leader epoch %d; want 0 and %d", l.LogEndOffset(), l.LeaderEpoch(), epochRaiseMargin)
	}
	produceN(t, d.client(kgo.RecordPartitioner(kgo.ManualPartitioner())), "grow", 1, 0, 1)
	if got := localBatches(t, l); len(got) != 1 || got[0].offset != 0 {
		t.Fatalf("added partition after a produce: %+v, want one batch at offset 0", got)
	}
}

// TestReattachAfterSwitchoverKeepsNewerPosition: Y mirrors t from X and fails over at 10;
// X follows Y (failback) up to 21 and fails over in turn, then takes 3 writes of its own.
// Re-attached to Y, X truncates to its own, later last mirror position (21: the marker
// and the 3 writes go) rather than to Y's older one (10), which would drop and fetch
// again 11 records X had mirrored from Y and make its consumers read them twice.
func TestReattachAfterSwitchoverKeepsNewerPosition(t *testing.T) {
	x, y, _, ey := mirroredPair(t, "t", 10, "yx", "t")
	ey.stopTopics("yx", "t") // Y fails over at 10
	ycl := y.client()
	produceN(t, ycl, "t", 0, 10, 5)
	ex := x.env()
	ex.createMirror("xy", y.b.Addr())
	ex.startTopics("xy", "t") // X fails back from Y
	ex.waitCaughtUp(ycl, "xy", "t")
	produceN(t, ycl, "t", 0, 15, 5)
	ex.waitCaughtUp(ycl, "xy", "t")
	ex.stopTopics("xy", "t") // X fails over at Y's end
	stopAt := sourceEnds(t, ycl, "t")[0]
	produceN(t, x.client(), "t", 0, 100, 3)

	ex.startTopics("xy", "t") // re-attach X to Y
	ex.waitCaughtUp(ycl, "xy", "t")
	sameBatches(t, "t on X after the re-attach", sourceBatches(t, ycl, "t", 0), x.log("t", 0))
	if d := ex.describe("xy", "t")[0]; d.TruncatedOffset != stopAt || d.TruncatedRecords != 4 {
		t.Fatalf("truncation report: truncated to %d, %d records; want %d and 4 (MIRROR_PID_RESET + 3 writes)", d.TruncatedOffset, d.TruncatedRecords, stopAt)
	}

	// X fails over again with nothing new from Y: the failover raises the leader epoch
	// above every epoch the log had, so its writes share no epoch with earlier ones
	xl, err := x.b.Log("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	epochBefore := xl.LeaderEpoch()
	ex.stopTopics("xy", "t")
	if got := xl.LeaderEpoch(); got <= epochBefore {
		t.Fatalf("second failover: leader epoch %d, not above %d", got, epochBefore)
	}
}

// TestSwitchbackResetsTruncationReport: A fails back from B once with a divergent tail
// (truncation report: 3 records), then the roles swap in a planned switchover and back.
// The second failback of A truncates nothing, and describe says so instead of repeating
// the first failback's report.
func TestSwitchbackResetsTruncationReport(t *testing.T) {
	a, b, acl, eb := mirroredPair(t, "t", 10, "ba", "t")
	eb.pauseTopics("ba", "t")
	produceN(t, acl, "t", 0, 10, 3) // A's divergent tail
	eb.stopTopics("ba", "t")        // B fails over at 10
	bcl := b.client()
	produceN(t, bcl, "t", 0, 20, 2)
	ea := a.env()
	ea.createMirror("ab", b.b.Addr())
	ea.startTopics("ab", "t") // A fails back: 3 records truncated
	ea.waitCaughtUp(bcl, "ab", "t")
	if d := ea.describe("ab", "t")[0]; d.TruncatedOffset != 10 || d.TruncatedRecords != 3 {
		t.Fatalf("first failback: truncated to %d, %d records; want 10 and 3", d.TruncatedOffset, d.TruncatedRecords)
	}
	// planned switchover to A and back to B, nothing written in between
	ea.stopTopics("ab", "t")
	eb.startTopics("ba", "t")
	eb.waitCaughtUp(acl, "ba", "t")
	produceN(t, acl, "t", 0, 30, 2)
	eb.waitCaughtUp(acl, "ba", "t")
	eb.stopTopics("ba", "t")
	ea.startTopics("ab", "t") // A fails back again: B holds everything A has
	ea.waitCaughtUp(bcl, "ab", "t")
	sameBatches(t, "t on A", sourceBatches(t, bcl, "t", 0), a.log("t", 0))
	if d := ea.describe("ab", "t")[0]; d.TruncatedOffset != -1 || d.TruncatedRecords != 0 {
		t.Fatalf("second failback truncated nothing, yet describe reports truncated to %d, %d records", d.TruncatedOffset, d.TruncatedRecords)
	}
}

// TestSyncTasksFailWhileSourceDown: with the source down, every sync task reports a
// failure, also those that had nothing to do (no partition MIRRORING for group offsets,
// no include pattern for topic discovery), so that an alert on the last success fires;
// a topic excluded through topics.exclude meanwhile is still failed over (a way to fail
// over in a disaster that needs nothing from the source).
func TestSyncTasksFailWhileSourceDown(t *testing.T) {
	src, dst, _, ed := mirroredPair(t, "t", 3, "m", "t")
	ed.pauseTopics("m", "t")
	src.stop()
	for _, task := range []string{TaskTopicDiscovery, TaskTopicConfigs, TaskGroupOffsets, TaskACLs, TaskSourceOffsets} {
		waitSyncError(t, dst, "m", task, "the source does not answer")
	}
	setMirrorConfig(t, dst.client(), "m", "topics.exclude", "t")
	ed.waitState("m", "t", mirrorproto.StateStopped)
}
