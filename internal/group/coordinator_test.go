package group

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestPartitionForMatchesJavaHashCode(t *testing.T) {
	c := New(Options{NumPartitions: 50})
	// "a".hashCode() = 97; U+1F600 is the UTF-16 pair D83D DE00: 0xD83D*31+0xDE00 = 1772899.
	// "polygenelubricants".hashCode() is Integer.MIN_VALUE, which Utils.abs maps to 0.
	for id, want := range map[string]int32{"a": 47, "\U0001F600": 1772899 % 50, "polygenelubricants": 0, "": 0} {
		if got := c.PartitionFor(id); got != want {
			t.Errorf("PartitionFor(%q) = %d, want %d", id, got, want)
		}
	}
	// "Aa" and "BB" collide in Java.
	if c.PartitionFor("Aa") != c.PartitionFor("BB") {
		t.Error("Aa and BB must share a partition")
	}
}

func TestJoinSyncHeartbeatAndLeave(t *testing.T) {
	e := newEnv(t)
	c := e.start(nil)
	a, b, gen := stableTwo(t, c, "g", joinOpts{})
	wantErr(t, "heartbeat A", heartbeat(c, "g", a, gen, ""), nil)
	wantErr(t, "heartbeat B", heartbeat(c, "g", b, gen, ""), nil)
	if st, ok := c.GroupState("g"); !ok || st != "Stable" {
		t.Fatalf("state %s %v", st, ok)
	}
	d := describe(c, "g")
	if d.State != "Stable" || d.Protocol != "range" || d.ProtocolType != "consumer" || len(d.Members) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	for _, m := range d.Members {
		if m.ClientID != "client-g" || m.ClientHost != "/127.0.0.1" || len(m.MemberAssignment) != 2 {
			t.Fatalf("member %+v", m)
		}
	}

	// Group commit by a member, then B leaves: A must rejoin alone.
	wantErr(t, "commit A", commit(c, 9, "g", a, gen, "t", 0, 42), nil)
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version = 5
	lr.Group = "g"
	lr.Members = []kmsg.LeaveGroupRequestMember{{MemberID: b}, {MemberID: "nobody"}}
	resp := c.LeaveGroup(context.Background(), lr)
	wantErr(t, "leave B", resp.Members[0].ErrorCode, nil)
	wantErr(t, "leave unknown", resp.Members[1].ErrorCode, kerr.UnknownMemberID)
	wantErr(t, "heartbeat A after leave", heartbeat(c, "g", a, gen, ""), kerr.RebalanceInProgress)
	// Commits are still accepted while preparing the rebalance.
	wantErr(t, "commit A while preparing", commit(c, 9, "g", a, gen, "t", 1, 43), nil)
	ra := recv(t, joinAsync(c, joinReq("g", joinOpts{memberID: a})))
	wantErr(t, "rejoin A", ra.ErrorCode, nil)
	if ra.Generation != gen+1 || len(ra.Members) != 1 || ra.LeaderID != a {
		t.Fatalf("rejoin: gen %d leader %s members %d", ra.Generation, ra.LeaderID, len(ra.Members))
	}
	wantErr(t, "heartbeat B after leaving", heartbeat(c, "g", b, gen, ""), kerr.UnknownMemberID)
	wantErr(t, "heartbeat A old generation", heartbeat(c, "g", a, gen, ""), kerr.IllegalGeneration)
	wantErr(t, "commit A while completing", commit(c, 9, "g", a, ra.Generation, "t", 0, 44), kerr.RebalanceInProgress)
	s := recv(t, syncAsync(c, "g", a, ra.Generation, "", map[string][]byte{a: []byte("x")}))
	wantErr(t, "sync A", s.ErrorCode, nil)
	if got := fetch(t, c, "g", "t", 1); got.Offset != 43 || got.LeaderEpoch != 7 || *got.Metadata != "meta" {
		t.Fatalf("fetched %+v", got)
	}

	// The last member leaving makes the group Empty (and deletable).
	lr.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a}}
	wantErr(t, "leave A", c.LeaveGroup(context.Background(), lr).Members[0].ErrorCode, nil)
	eventually(t, "group empty", func() bool { st, _ := c.GroupState("g"); return st == "Empty" })
}

func TestSessionTimeoutExpiry(t *testing.T) {
	e := newEnv(t)
	c := e.start(nil)
	a, b, gen := stableTwo(t, c, "g", joinOpts{session: 300, rebalance: 10000})
	// B stops heartbeating; A keeps going and learns about the rebalance.
	eventually(t, "B expired", func() bool {
		return heartbeat(c, "g", a, gen, "") == kerr.RebalanceInProgress.Code
	})
	ra := recv(t, joinAsync(c, joinReq("g", joinOpts{memberID: a, session: 300})))
	wantErr(t, "rejoin A", ra.ErrorCode, nil)
	if len(ra.Members) != 1 || ra.Members[0].MemberID != a {
		t.Fatalf("members after expiry: %+v", ra.Members)
	}
	wantErr(t, "heartbeat of the expired member", heartbeat(c, "g", b, gen, ""), kerr.UnknownMemberID)
}

func TestStaticMemberRejoinWithoutRebalance(t *testing.T) {
	e := newEnv(t)
	c := e.start(nil)
	// Static members join without MEMBER_ID_REQUIRED.
	ra := recv(t, joinAsync(c, joinReq("s", joinOpts{instance: "ia"})))
	wantErr(t, "join a", ra.ErrorCode, nil)
	a := ra.MemberID
	wantErr(t, "sync a", recv(t, syncAsync(c, "s", a, ra.Generation, "ia", map[string][]byte{a: []byte("A0")})).ErrorCode, nil)
	chB := joinAsync(c, joinReq("s", joinOpts{instance: "ib"}))
	eventually(t, "rebalance", func() bool { return heartbeat(c, "s", a, ra.Generation, "ia") == kerr.RebalanceInProgress.Code })
	recv(t, joinAsync(c, joinReq("s", joinOpts{memberID: a, instance: "ia"})))
	rb := recv(t, chB)
	wantErr(t, "join b", rb.ErrorCode, nil)
	gen, b := rb.Generation, rb.MemberID
	chSB := syncAsync(c, "s", b, gen, "ib", nil)
	wantErr(t, "sync a", recv(t, syncAsync(c, "s", a, gen, "ia", map[string][]byte{a: []byte("A"), b: []byte("B")})).ErrorCode, nil)
	if s := recv(t, chSB); string(s.MemberAssignment) != "B" {
		t.Fatalf("b assignment %q", s.MemberAssignment)
	}

	// b restarts: unknown member ID, same group.instance.id and metadata, while Stable.
	rb2 := recv(t, joinAsync(c, joinReq("s", joinOpts{instance: "ib"})))
	wantErr(t, "static rejoin", rb2.ErrorCode, nil)
	if rb2.Generation != gen || rb2.MemberID == b || rb2.LeaderID == rb2.MemberID {
		t.Fatalf("static rejoin: gen %d (want %d), member %s (old %s), leader %s", rb2.Generation, gen, rb2.MemberID, b, rb2.LeaderID)
	}
	if st, _ := c.GroupState("s"); st != "Stable" {
		t.Fatalf("state after static rejoin: %s", st)
	}
	s := recv(t, syncAsync(c, "s", rb2.MemberID, gen, "ib", nil))
	wantErr(t, "sync after static rejoin", s.ErrorCode, nil)
	if string(s.MemberAssignment) != "B" {
		t.Fatalf("old assignment not kept: %q", s.MemberAssignment)
	}
	wantErr(t, "heartbeat a (no rebalance)", heartbeat(c, "s", a, gen, "ia"), nil)

	// The old incarnation is fenced everywhere.
	wantErr(t, "old b heartbeat", heartbeat(c, "s", b, gen, "ib"), kerr.FencedInstanceID)
	wantErr(t, "old b commit", commit(c, 8, "s", b, gen, "t", 0, 1, "ib"), kerr.FencedInstanceID)
	wantErr(t, "old b join", recv(t, joinAsync(c, joinReq("s", joinOpts{memberID: b, instance: "ib"}))).ErrorCode, kerr.FencedInstanceID)
	wantErr(t, "old b sync", recv(t, syncAsync(c, "s", b, gen, "ib", nil)).ErrorCode, kerr.FencedInstanceID)

	// The static leader rejoining with v9 is told to skip the assignment (KIP-814).
	ra3 := recv(t, joinAsync(c, joinReq("s", joinOpts{instance: "ia"})))
	wantErr(t, "leader static rejoin", ra3.ErrorCode, nil)
	if !ra3.SkipAssignment || ra3.LeaderID != ra3.MemberID || len(ra3.Members) != 2 {
		t.Fatalf("leader static rejoin: skip %v leader %s member %s members %d", ra3.SkipAssignment, ra3.LeaderID, ra3.MemberID, len(ra3.Members))
	}
	if st, _ := c.GroupState("s"); st != "Stable" {
		t.Fatalf("state after leader static rejoin: %s", st)
	}

	// A static member rejoining with other metadata changes the protocol choice: rebalance.
	ch := joinAsync(c, joinReq("s", joinOpts{instance: "ib", protocols: []kmsg.JoinGroupRequestProtocol{{Name: "other", Metadata: []byte{1}}}}))
	r := recv(t, ch)
	wantErr(t, "join with unsupported protocol", r.ErrorCode, kerr.InconsistentGroupProtocol)
}

func TestJoinErrors(t *testing.T) {
	e := newEnv(t)
	c := e.start(func(o *Options) { o.GroupMaxSessionTimeoutMs = 60000 })
	ctx := context.Background()
	wantErr(t, "empty group ID", c.JoinGroup(ctx, joinReq("", joinOpts{})).ErrorCode, kerr.InvalidGroupID)
	long := strings.Repeat("g", MaxGroupIDLen+1)
	wantErr(t, "too long group ID", c.JoinGroup(ctx, joinReq(long, joinOpts{})).ErrorCode, kerr.InvalidGroupID)
	wantErr(t, "session too small", c.JoinGroup(ctx, joinReq("g", joinOpts{session: 5})).ErrorCode, kerr.InvalidSessionTimeout)
	wantErr(t, "session too large", c.JoinGroup(ctx, joinReq("g", joinOpts{session: 60001})).ErrorCode, kerr.InvalidSessionTimeout)
	wantErr(t, "unknown member in absent group", c.JoinGroup(ctx, joinReq("nope", joinOpts{memberID: "m"})).ErrorCode, kerr.UnknownMemberID)
	wantErr(t, "no protocols", c.JoinGroup(ctx, joinReq("g", joinOpts{protocols: []kmsg.JoinGroupRequestProtocol{}})).ErrorCode, kerr.InconsistentGroupProtocol)
	// Versions before 4 join in one step.
	r := recv(t, joinAsync(c, joinReq("old", joinOpts{version: 3})))
	wantErr(t, "v3 join", r.ErrorCode, nil)
	// Another protocol type is inconsistent with the group's.
	wantErr(t, "other protocol type", c.JoinGroup(ctx, joinReq("old", joinOpts{version: 3, ptype: "connect"})).ErrorCode, kerr.InconsistentGroupProtocol)
	wantErr(t, "sync unknown member", recv(t, syncAsync(c, "old", "x", r.Generation, "", nil)).ErrorCode, kerr.UnknownMemberID)
	wantErr(t, "sync stale generation", recv(t, syncAsync(c, "old", r.MemberID, r.Generation-1, "", nil)).ErrorCode, kerr.IllegalGeneration)
}

func TestProtocolSelection(t *testing.T) {
	e := newEnv(t)
	c := e.start(nil)
	ps := func(names ...string) []kmsg.JoinGroupRequestProtocol {
		var out []kmsg.JoinGroupRequestProtocol
		for _, n := range names {
			out = append(out, kmsg.JoinGroupRequestProtocol{Name: n, Metadata: consumerMeta("t")})
		}
		return out
	}
	ra := recv(t, joinAsync(c, joinReq("p", joinOpts{version: 3, protocols: ps("cooperative-sticky", "range")})))
	if *ra.Protocol != "cooperative-sticky" {
		t.Fatalf("protocol %s", *ra.Protocol)
	}
	wantErr(t, "sync", recv(t, syncAsync(c, "p", ra.MemberID, ra.Generation, "", nil)).ErrorCode, kerr.InconsistentGroupProtocol)
	// A member supporting only range joins: range is the only common protocol.
	chB := joinAsync(c, joinReq("p", joinOpts{version: 3, protocols: ps("range")}))
	eventually(t, "rebalance", func() bool { return heartbeat(c, "p", ra.MemberID, ra.Generation, "") == kerr.RebalanceInProgress.Code })
	ra2 := recv(t, joinAsync(c, joinReq("p", joinOpts{version: 3, memberID: ra.MemberID, protocols: ps("cooperative-sticky", "range")})))
	rb := recv(t, chB)
	if *ra2.Protocol != "range" || *rb.Protocol != "range" {
		t.Fatalf("protocols %s %s", *ra2.Protocol, *rb.Protocol)
	}
}

func TestOffsetCommitValidation(t *testing.T) {
	e := newEnv(t)
	c := e.start(nil)
	// Simple commits: generation -1, no member, group without members.
	wantErr(t, "simple commit", commit(c, 8, "simple", "", -1, "t", 0, 10), nil)
	if got := fetch(t, c, "simple", "t", 0); got.Offset != 10 || got.LeaderEpoch != 7 {
		t.Fatalf("fetched %+v", got)
	}
	if got := fetch(t, c, "simple", "t", 3); got.Offset != -1 || got.LeaderEpoch != -1 {
		t.Fatalf("uncommitted partition %+v", got)
	}
	// Commits to an absent group from a member of some generation.
	wantErr(t, "generation on absent group v8", commit(c, 8, "absent", "m", 3, "t", 0, 1), kerr.IllegalGeneration)
	wantErr(t, "generation on absent group v9", commit(c, 9, "absent", "m", 3, "t", 0, 1), kerr.GroupIDNotFound)
	if _, ok := c.GroupState("absent"); ok {
		t.Fatal("a rejected commit created the group")
	}
	// Bad input.
	wantErr(t, "missing topic", commit(c, 8, "simple", "", -1, "missing", 0, 1), kerr.UnknownTopicOrPartition)
	wantErr(t, "missing partition", commit(c, 8, "simple", "", -1, "t", 99, 1), kerr.UnknownTopicOrPartition)
	wantErr(t, "too long group ID", commit(c, 8, strings.Repeat("x", MaxGroupIDLen+1), "", -1, "t", 0, 1), kerr.InvalidGroupID)

	a, _, gen := stableTwo(t, c, "g", joinOpts{})
	wantErr(t, "member commit", commit(c, 8, "g", a, gen, "t", 0, 5), nil)
	wantErr(t, "stale generation", commit(c, 8, "g", a, gen-1, "t", 0, 6), kerr.IllegalGeneration)
	wantErr(t, "unknown member", commit(c, 8, "g", "ghost", gen, "t", 0, 6), kerr.UnknownMemberID)
	wantErr(t, "simple commit to an active group", commit(c, 8, "g", "", -1, "t", 0, 6), kerr.UnknownMemberID)
	if got := fetch(t, c, "g", "t", 0); got.Offset != 5 {
		t.Fatalf("rejected commits changed the offset: %+v", got)
	}
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.Generation, r.MemberID = 8, "g", gen, a
	big := strings.Repeat("m", MaxOffsetMetadataBytes+1)
	r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 1, Metadata: &big}, {Partition: 2, Offset: 2}}}}
	resp := c.OffsetCommit(context.Background(), r)
	wantErr(t, "metadata too large", resp.Topics[0].Partitions[0].ErrorCode, kerr.OffsetMetadataTooLarge)
	wantErr(t, "valid partition of the same request", resp.Topics[0].Partitions[1].ErrorCode, nil)
}

func TestOffsetFetchSeveralGroupsAndAll(t *testing.T) {
	e := newEnv(t)
	c := e.start(nil)
	wantErr(t, "commit g1", commit(c, 8, "g1", "", -1, "t", 0, 1), nil)
	wantErr(t, "commit g1", commit(c, 8, "g1", "", -1, "u", 1, 2), nil)
	wantErr(t, "commit g2", commit(c, 8, "g2", "", -1, "t", 2, 3), nil)
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 9
	r.RequireStable = true
	r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g1"}, {Group: "g2"}, {Group: "none"}, {Group: strings.Repeat("x", MaxGroupIDLen+1)}}
	resp := c.OffsetFetch(context.Background(), r)
	if len(resp.Groups) != 4 || len(resp.Groups[0].Topics) != 2 || len(resp.Groups[1].Topics) != 1 || len(resp.Groups[2].Topics) != 0 {
		t.Fatalf("response %+v", resp.Groups)
	}
	wantErr(t, "too long group", resp.Groups[3].ErrorCode, kerr.InvalidGroupID)
	if p := resp.Groups[0].Topics[1].Partitions[0]; resp.Groups[0].Topics[1].Topic != "u" || p.Offset != 2 {
		t.Fatalf("g1 u: %+v", resp.Groups[0].Topics[1])
	}
	// v5 single group, all topics.
	r5 := kmsg.NewPtrOffsetFetchRequest()
	r5.Version, r5.Group = 5, "g2"
	resp5 := c.OffsetFetch(context.Background(), r5)
	if len(resp5.Topics) != 1 || resp5.Topics[0].Partitions[0].Offset != 3 {
		t.Fatalf("v5: %+v", resp5)
	}
}

func TestRestartKeepsGroupsAndOffsets(t *testing.T) {
	e := newEnv(t)
	c := e.start(nil)
	a, b, gen := stableTwo(t, c, "g", joinOpts{})
	wantErr(t, "commit", commit(c, 9, "g", a, gen, "t", 0, 100), nil)
	wantErr(t, "commit", commit(c, 9, "g", b, gen, "t", 1, 200), nil)
	wantErr(t, "recommit", commit(c, 9, "g", b, gen, "t", 1, 201), nil)
	wantErr(t, "simple commit", commit(c, 9, "simple", "", -1, "u", 0, 7), nil)
	wantErr(t, "doomed commit", commit(c, 9, "doomed", "", -1, "u", 0, 7), nil)
	dr := kmsg.NewPtrDeleteGroupsRequest()
	dr.Version = 2
	dr.Groups = []string{"doomed"}
	wantErr(t, "delete", c.DeleteGroups(context.Background(), dr).Groups[0].ErrorCode, nil)
	c.Close()
	e.closeLogs()

	c2 := e.start(nil)
	if got := fetch(t, c2, "g", "t", 1); got.Offset != 201 || got.LeaderEpoch != 7 || *got.Metadata != "meta" {
		t.Fatalf("after restart: %+v", got)
	}
	if got := fetch(t, c2, "simple", "u", 0); got.Offset != 7 {
		t.Fatalf("simple after restart: %+v", got)
	}
	if _, ok := c2.GroupState("doomed"); ok {
		t.Fatal("deleted group came back")
	}
	d := describe(c2, "g")
	if d.State != "Stable" || len(d.Members) != 2 || d.Protocol != "range" {
		t.Fatalf("described after restart: %+v", d)
	}
	// Members resume with their generation.
	wantErr(t, "heartbeat after restart", heartbeat(c2, "g", a, gen, ""), nil)
	s := recv(t, syncAsync(c2, "g", b, gen, "", nil))
	if string(s.MemberAssignment) != "pb" {
		t.Fatalf("assignment after restart %q", s.MemberAssignment)
	}
	if got := c2.ListGroupIDs(); strings.Join(got, ",") != "g,simple" {
		t.Fatalf("groups after restart %v", got)
	}
}

func TestOffsetExpiry(t *testing.T) {
	e := newEnv(t)
	c := e.start(func(o *Options) { o.OffsetsRetentionMs = 300; o.OffsetsRetentionCheckMs = 20 })
	wantErr(t, "simple commit", commit(c, 8, "simple", "", -1, "t", 0, 1), nil)
	// A Stable consumer group subscribed to t: its t offsets stay, its u offsets expire.
	a, _, gen := stableTwo(t, c, "g", joinOpts{session: 60000})
	wantErr(t, "commit t", commit(c, 8, "g", a, gen, "t", 0, 5), nil)
	wantErr(t, "commit u", commit(c, 8, "g", a, gen, "u", 0, 6), nil)
	eventually(t, "simple group expired", func() bool { _, ok := c.GroupState("simple"); return !ok })
	eventually(t, "unsubscribed offset expired", func() bool { return c.CommittedOffsets("g")["u"] == nil })
	if c.CommittedOffsets("g")["t"][0].Offset != 5 {
		t.Fatal("offset of a subscribed topic of a Stable group expired")
	}
	c.Close()
	e.closeLogs()
	c2 := e.start(nil)
	if _, ok := c2.GroupState("simple"); ok {
		t.Fatal("expired group back after restart")
	}
	if offs := c2.CommittedOffsets("g"); offs["u"] != nil || offs["t"][0].Offset != 5 {
		t.Fatalf("offsets after restart %+v", offs)
	}
}

func TestEmptyGroupOffsetsExpireAfterRetention(t *testing.T) {
	e := newEnv(t)
	c := e.start(func(o *Options) { o.OffsetsRetentionMs = 200; o.OffsetsRetentionCheckMs = 20 })
	r := recv(t, joinAsync(c, joinReq("g", joinOpts{version: 3})))
	wantErr(t, "sync", recv(t, syncAsync(c, "g", r.MemberID, r.Generation, "", nil)).ErrorCode, nil)
	wantErr(t, "commit", commit(c, 8, "g", r.MemberID, r.Generation, "t", 0, 9), nil)
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Group, lr.MemberID = "g", r.MemberID
	wantErr(t, "leave", c.LeaveGroup(context.Background(), lr).ErrorCode, nil)
	eventually(t, "empty consumer group removed after retention", func() bool { _, ok := c.GroupState("g"); return !ok })
}

func TestDeleteGroupsAndOffsetDelete(t *testing.T) {
	e := newEnv(t)
	c := e.start(nil)
	ctx := context.Background()
	a, _, gen := stableTwo(t, c, "g", joinOpts{})
	wantErr(t, "commit t", commit(c, 8, "g", a, gen, "t", 0, 1), nil)
	wantErr(t, "commit u", commit(c, 8, "g", a, gen, "u", 0, 1), nil)

	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "u", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	resp := c.OffsetDelete(ctx, od)
	wantErr(t, "offset delete", resp.ErrorCode, nil)
	wantErr(t, "subscribed topic", resp.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
	wantErr(t, "unsubscribed topic", resp.Topics[1].Partitions[0].ErrorCode, nil)
	if offs := c.CommittedOffsets("g"); offs["u"] != nil || offs["t"] == nil {
		t.Fatalf("offsets after OffsetDelete %+v", offs)
	}
	od.Group = "absent"
	wantErr(t, "offset delete absent", c.OffsetDelete(ctx, od).ErrorCode, kerr.GroupIDNotFound)

	dr := kmsg.NewPtrDeleteGroupsRequest()
	dr.Version = 2
	dr.Groups = []string{"g", "absent"}
	dresp := c.DeleteGroups(ctx, dr)
	wantErr(t, "delete active", dresp.Groups[0].ErrorCode, kerr.NonEmptyGroup)
	wantErr(t, "delete absent", dresp.Groups[1].ErrorCode, kerr.GroupIDNotFound)

	// SyncOffsets refuses an active group and creates an absent one.
	if err := c.SyncOffsets("g", map[string]map[int32]Offset{"t": {0: {Offset: 3}}}); err == nil || !strings.Contains(err.Error(), "Stable") {
		t.Fatalf("SyncOffsets on an active group: %v", err)
	}
	if err := c.SyncOffsets("mirrored", map[string]map[int32]Offset{"t": {1: {Offset: 3, LeaderEpoch: 2}}}); err != nil {
		t.Fatal(err)
	}
	if st, ok := c.GroupState("mirrored"); !ok || st != "Empty" || c.CommittedOffsets("mirrored")["t"][1].Offset != 3 {
		t.Fatalf("mirrored group %s %v", st, ok)
	}
	dr.Groups = []string{"mirrored"}
	wantErr(t, "delete empty", c.DeleteGroups(ctx, dr).Groups[0].ErrorCode, nil)
	if _, ok := c.GroupState("mirrored"); ok {
		t.Fatal("deleted group still exists")
	}
	d6 := kmsg.NewPtrDescribeGroupsRequest()
	d6.Version = 6
	d6.Groups = []string{"mirrored"}
	wantErr(t, "describe deleted v6", c.DescribeGroups(ctx, d6).Groups[0].ErrorCode, kerr.GroupIDNotFound)
}

func TestListGroupsFilters(t *testing.T) {
	e := newEnv(t)
	c := e.start(nil)
	wantErr(t, "simple", commit(c, 8, "simple", "", -1, "t", 0, 1), nil)
	stableTwo(t, c, "g", joinOpts{})
	list := func(states, types []string) []string {
		r := kmsg.NewPtrListGroupsRequest()
		r.Version = 5
		r.StatesFilter, r.TypesFilter = states, types
		var out []string
		for _, g := range c.ListGroups(context.Background(), r).Groups {
			out = append(out, g.Group+":"+g.GroupState+":"+g.ProtocolType+":"+g.GroupType)
		}
		return out
	}
	if got := strings.Join(list(nil, nil), " "); got != "g:Stable:consumer:classic simple:Empty::classic" {
		t.Fatalf("all: %s", got)
	}
	if got := strings.Join(list([]string{"stable"}, []string{"Classic"}), " "); got != "g:Stable:consumer:classic" {
		t.Fatalf("stable: %s", got)
	}
	if got := list(nil, []string{"consumer"}); len(got) != 0 {
		t.Fatalf("consumer type: %v", got)
	}
}
