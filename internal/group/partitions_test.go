package group

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupOn returns a group ID of partition p (prefix + a number).
func groupOn(c *Coordinator, prefix string, p int32) string {
	for i := 0; ; i++ {
		if id := fmt.Sprintf("%s%d", prefix, i); c.PartitionFor(id) == p {
			return id
		}
	}
}

// fetchCode is the group error of OffsetFetch v8 for groupID.
func fetchCode(c *Coordinator, groupID string) int16 {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = groupID
	r.Groups = []kmsg.OffsetFetchRequestGroup{g}
	return c.OffsetFetch(context.Background(), r).Groups[0].ErrorCode
}

// fetchStable is OffsetFetch v8 with RequireStable for one partition.
func fetchStable(t *testing.T, c *Coordinator, groupID, topic string, part int32) kmsg.OffsetFetchResponseGroupTopicPartition {
	t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.RequireStable = 8, true
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = groupID
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{part}}}
	r.Groups = []kmsg.OffsetFetchRequestGroup{g}
	resp := c.OffsetFetch(context.Background(), r)
	wantErr(t, "offset fetch", resp.Groups[0].ErrorCode, nil)
	return resp.Groups[0].Topics[0].Partitions[0]
}

func listGroups(c *Coordinator) *kmsg.ListGroupsResponse {
	r := kmsg.NewPtrListGroupsRequest()
	r.Version = 4
	return c.ListGroups(context.Background(), r)
}

func describeCode(c *Coordinator, groupID string) int16 {
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = 5
	r.Groups = []string{groupID}
	return c.DescribeGroups(context.Background(), r).Groups[0].ErrorCode
}

// txnCommit sends TxnOffsetCommit v3 of producer pid/epoch for one partition, with
// member ID "" and generation −1, through verify.
func txnCommit(c *Coordinator, groupID string, pid int64, epoch int16, topic string, part int32, offset int64, verify TxnVerifier) int16 {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = 3
	r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, r.Generation = "tx", groupID, pid, epoch, -1
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = part, offset, 3
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic, tt.Partitions = topic, []kmsg.TxnOffsetCommitRequestTopicPartition{p}
	r.Topics = []kmsg.TxnOffsetCommitRequestTopic{tt}
	return c.TxnOffsetCommit(context.Background(), r, verify).Topics[0].Partitions[0].ErrorCode
}

// TestElectionAndResignation: a group of a partition never elected gets NOT_COORDINATOR;
// while its partition loads, COORDINATOR_LOAD_IN_PROGRESS (SyncGroup
// REBALANCE_IN_PROGRESS, Heartbeat NONE, ListGroups the error at the top level) and
// another partition is served meanwhile; once loaded, its offsets are there. A
// resignation answers NOT_COORDINATOR again; elections not newer than it are ignored,
// a newer one loads the partition again, a stale resignation is ignored.
func TestElectionAndResignation(t *testing.T) {
	e := newEnv(t)
	c0 := e.start(nil)
	g := groupOn(c0, "g", 1)
	other := groupOn(c0, "o", 2)
	wantErr(t, "commit", commit(c0, 8, g, "", -1, "t", 0, 42), nil)
	c0.Close()

	c := New(e.opts())
	defer c.Close()
	wantErr(t, "join, never elected", c.JoinGroup(context.Background(), joinReq(g, joinOpts{})).ErrorCode, kerr.NotCoordinator)
	wantErr(t, "commit, never elected", commit(c, 8, g, "", -1, "t", 0, 1), kerr.NotCoordinator)
	wantErr(t, "fetch, never elected", fetchCode(c, g), kerr.NotCoordinator)
	wantErr(t, "describe, never elected", describeCode(c, g), kerr.NotCoordinator)
	if r := listGroups(c); r.ErrorCode != 0 || len(r.Groups) != 0 {
		t.Fatalf("ListGroups with nothing elected: %+v", r)
	}

	release := e.hold(1)
	defer release()
	c.OnElection(1, 1)
	wantErr(t, "commit while loading", commit(c, 8, g, "", -1, "t", 0, 1), kerr.CoordinatorLoadInProgress)
	wantErr(t, "join while loading", c.JoinGroup(context.Background(), joinReq(g, joinOpts{})).ErrorCode, kerr.CoordinatorLoadInProgress)
	wantErr(t, "sync while loading", recv(t, syncAsync(c, g, "m", 1, "", nil)).ErrorCode, kerr.RebalanceInProgress)
	wantErr(t, "heartbeat while loading", heartbeat(c, g, "m", 1, ""), nil)
	wantErr(t, "fetch while loading", fetchCode(c, g), kerr.CoordinatorLoadInProgress)
	if r := listGroups(c); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("ListGroups while loading: %s", errName(r.ErrorCode))
	}
	// Partition 2 loads and is served while partition 1 is still loading.
	c.OnElection(2, 1)
	eventually(t, "partition 2 served while partition 1 loads", func() bool {
		return commit(c, 8, other, "", -1, "t", 1, 7) == 0
	})
	wantErr(t, "commit, partition 1 still loading", commit(c, 8, g, "", -1, "t", 0, 1), kerr.CoordinatorLoadInProgress)
	release()
	if err := c.AwaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fetch(t, c, g, "t", 0); got.Offset != 42 {
		t.Fatalf("loaded offset %+v, want 42", got)
	}
	if r := listGroups(c); r.ErrorCode != 0 || len(r.Groups) != 2 {
		t.Fatalf("ListGroups once loaded: %s %+v", errName(r.ErrorCode), r.Groups)
	}

	c.OnResignation(1, 3)
	wantErr(t, "commit after resignation", commit(c, 8, g, "", -1, "t", 0, 1), kerr.NotCoordinator)
	wantErr(t, "describe after resignation", describeCode(c, g), kerr.NotCoordinator)
	if r := listGroups(c); r.ErrorCode != 0 || len(r.Groups) != 1 || r.Groups[0].Group != other {
		t.Fatalf("ListGroups after resignation: %+v", r.Groups)
	}
	c.OnElection(1, 2) // older than the resignation
	c.OnElection(1, 3) // the resignation's epoch
	wantErr(t, "commit after stale elections", commit(c, 8, g, "", -1, "t", 0, 1), kerr.NotCoordinator)
	c.OnElection(1, 4)
	if err := c.AwaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fetch(t, c, g, "t", 0); got.Offset != 42 {
		t.Fatalf("offset after re-election %+v, want 42", got)
	}
	c.OnResignation(1, 3) // stale
	wantErr(t, "commit after a stale resignation", commit(c, 8, g, "", -1, "t", 0, 43), nil)
}

// TestResignationAnswersWaitingJoin: a member waiting in JoinGroup when the partition is
// resigned gets NOT_COORDINATOR, and so do later requests; nothing is written, so a new
// election loads the group as it was (Stable with its generation and member).
func TestResignationAnswersWaitingJoin(t *testing.T) {
	e := newEnv(t)
	c := e.start(nil)
	g := groupOn(c, "g", 0)
	ra := recv(t, joinDynamic(t, c, g, joinOpts{}))
	wantErr(t, "join A", ra.ErrorCode, nil)
	wantErr(t, "sync A", recv(t, syncAsync(c, g, ra.MemberID, ra.Generation, "", map[string][]byte{ra.MemberID: []byte("all")})).ErrorCode, nil)
	chB := joinDynamic(t, c, g, joinOpts{})
	eventually(t, "B waits in JoinGroup (rebalance announced to A)", func() bool {
		return heartbeat(c, g, ra.MemberID, ra.Generation, "") == kerr.RebalanceInProgress.Code
	})
	leo := e.storage(0).LogEndOffset()
	c.OnResignation(0, 1)
	wantErr(t, "waiting JoinGroup", recv(t, chB).ErrorCode, kerr.NotCoordinator)
	wantErr(t, "heartbeat after resignation", heartbeat(c, g, ra.MemberID, ra.Generation, ""), kerr.NotCoordinator)
	if got := e.storage(0).LogEndOffset(); got != leo {
		t.Fatalf("the resignation wrote to the log: LEO %d → %d", leo, got)
	}
	c.OnElection(0, 2)
	if err := c.AwaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := describe(c, g)
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != ra.MemberID {
		t.Fatalf("reloaded group %+v", d)
	}
	wantErr(t, "heartbeat after re-election", heartbeat(c, g, ra.MemberID, ra.Generation, ""), nil)
}

// TestTxnOffsetsPendingUntilMarker: TxnOffsetCommit offsets are pending (OffsetFetch
// shows the committed offset; RequireStable answers UNSTABLE_OFFSET_COMMIT) until the
// producer's COMMIT marker makes them committed; an ABORT marker drops them; an offset
// committed after a transaction's offset wins over it at the COMMIT; the same holds
// after a restart, where an open transaction stays pending and its later COMMIT marker
// makes its offset visible.
func TestTxnOffsetsPendingUntilMarker(t *testing.T) {
	e := newEnv(t)
	c := e.start(nil)
	g := groupOn(c, "g", 1)
	const pid = 1000
	wantErr(t, "txn commit", txnCommit(c, g, pid, 0, "t", 0, 5, nil), nil)
	if got := fetch(t, c, g, "t", 0); got.Offset != -1 {
		t.Fatalf("pending offset visible: %+v", got)
	}
	if got := fetchStable(t, c, g, "t", 0); got.ErrorCode != kerr.UnstableOffsetCommit.Code || got.Offset != -1 {
		t.Fatalf("RequireStable with a pending offset: %s %d", errName(got.ErrorCode), got.Offset)
	}
	if got := fetchStable(t, c, g, "t", 1); got.ErrorCode != 0 {
		t.Fatalf("RequireStable, another partition: %s", errName(got.ErrorCode))
	}
	e.marker(c, 1, pid, 0, true)
	if got := fetch(t, c, g, "t", 0); got.Offset != 5 || got.LeaderEpoch != 3 {
		t.Fatalf("after COMMIT: %+v", got)
	}
	if got := fetchStable(t, c, g, "t", 0); got.ErrorCode != 0 || got.Offset != 5 {
		t.Fatalf("RequireStable after COMMIT: %s %d", errName(got.ErrorCode), got.Offset)
	}

	wantErr(t, "txn commit", txnCommit(c, g, pid, 0, "t", 0, 9, nil), nil)
	e.marker(c, 1, pid, 0, false)
	if got := fetch(t, c, g, "t", 0); got.Offset != 5 {
		t.Fatalf("after ABORT: %+v, want 5", got)
	}

	// A later simple commit wins over the transaction's earlier offset.
	wantErr(t, "txn commit", txnCommit(c, g, pid, 1, "t", 1, 20, nil), nil)
	wantErr(t, "simple commit", commit(c, 8, g, "", -1, "t", 1, 30), nil)
	e.marker(c, 1, pid, 1, true)
	if got := fetch(t, c, g, "t", 1); got.Offset != 30 {
		t.Fatalf("t-1 after COMMIT: %+v, want the later 30", got)
	}

	// An open transaction across a restart.
	wantErr(t, "txn commit", txnCommit(c, g, pid, 2, "t", 0, 12, nil), nil)
	c.Close()
	e.closeLogs()
	c = e.start(nil)
	if got := fetch(t, c, g, "t", 0); got.Offset != 5 {
		t.Fatalf("after restart: %+v, want 5 (12 pending)", got)
	}
	if got := fetch(t, c, g, "t", 1); got.Offset != 30 {
		t.Fatalf("t-1 after restart: %+v, want 30", got)
	}
	if got := fetchStable(t, c, g, "t", 0); got.ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("RequireStable after restart: %s", errName(got.ErrorCode))
	}
	e.marker(c, 1, pid, 2, true)
	if got := fetch(t, c, g, "t", 0); got.Offset != 12 {
		t.Fatalf("COMMIT after restart: %+v, want 12", got)
	}
	c.Close()
	e.closeLogs()
	c = e.start(nil)
	if got := fetch(t, c, g, "t", 0); got.Offset != 12 {
		t.Fatalf("after a second restart: %+v, want 12", got)
	}
}

// TestTxnMarkerDuringLoad: a marker appended while the partition loads (its CompleteTxn
// arrives before the load is done, and is ignored) is replayed by the load.
func TestTxnMarkerDuringLoad(t *testing.T) {
	e := newEnv(t)
	c0 := e.start(nil)
	g := groupOn(c0, "g", 2)
	wantErr(t, "txn commit", txnCommit(c0, g, 7, 0, "u", 1, 77, nil), nil)
	c0.Close()

	c := New(e.opts())
	defer c.Close()
	release := e.hold(2)
	c.OnElection(2, 5)
	e.marker(c, 2, 7, 0, true)
	release()
	if err := c.AwaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fetch(t, c, g, "u", 1); got.Offset != 77 {
		t.Fatalf("offset %+v, want 77", got)
	}
}

// TestTxnOffsetCommitChecks: the verifier's error is every partition's and nothing is
// written; member checks come first; a deleted group's pending offsets do not come back
// with a later COMMIT marker, also after a restart.
func TestTxnOffsetCommitChecks(t *testing.T) {
	e := newEnv(t)
	c := e.start(nil)
	g := groupOn(c, "g", 0)
	leo := e.storage(0).LogEndOffset()
	refuse := func(func()) int16 { return kerr.InvalidTxnState.Code }
	wantErr(t, "refused by the verifier", txnCommit(c, g, 1, 0, "t", 0, 5, refuse), kerr.InvalidTxnState)
	if got := e.storage(0).LogEndOffset(); got != leo {
		t.Fatalf("a refused TxnOffsetCommit wrote: LEO %d → %d", leo, got)
	}
	wantErr(t, "unknown topic", txnCommit(c, g, 1, 0, "nope", 0, 5, nil), kerr.UnknownTopicOrPartition)
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version, r.Group, r.ProducerID, r.MemberID, r.Generation = 3, g, 1, "ghost", 1
	r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	wantErr(t, "unknown member", c.TxnOffsetCommit(context.Background(), r, nil).Topics[0].Partitions[0].ErrorCode, kerr.UnknownMemberID)

	ran := false
	verify := func(fn func()) int16 { ran = true; fn(); return 0 }
	wantErr(t, "txn commit", txnCommit(c, g, 1, 0, "t", 0, 5, verify), nil)
	if !ran {
		t.Fatal("the verifier did not run")
	}
	dr := kmsg.NewPtrDeleteGroupsRequest()
	dr.Version, dr.Groups = 2, []string{g}
	wantErr(t, "delete", c.DeleteGroups(context.Background(), dr).Groups[0].ErrorCode, nil)
	e.marker(c, 0, 1, 0, true)
	if got := fetch(t, c, g, "t", 0); got.Offset != -1 {
		t.Fatalf("deleted group's offset came back: %+v", got)
	}
	c.Close()
	e.closeLogs()
	c = e.start(nil)
	if got := fetch(t, c, g, "t", 0); got.Offset != -1 {
		t.Fatalf("deleted group's offset came back after restart: %+v", got)
	}
}
