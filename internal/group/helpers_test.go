package group

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/record"
	"github.com/kmirror/kmirror/internal/storage"
)

// storageLog is a PartitionLog over the real internal/storage log, as the broker's. A
// scan first waits for the partition's gate when the test set one.
type storageLog struct {
	l    *storage.Log
	e    *env
	part int32
}

func (s storageLog) Append(recs []record.KV) (int64, error) {
	b := record.Build(record.BatchHeader{Timestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	info, err := s.l.AppendAsLeader(b, 0, 0)
	if err != nil {
		return 0, err
	}
	if err := s.l.Flush(); err != nil {
		return 0, err
	}
	return info.FirstOffset, nil
}

func (s storageLog) AppendTransactional(recs []record.KV, pid int64, epoch int16) (int64, error) {
	b := record.Build(record.BatchHeader{Attributes: record.TransactionalBit, Timestamp: time.Now().UnixMilli(),
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 0}, recs)
	info, err := s.l.AppendAsCoordinator(b, 0)
	if errors.Is(err, storage.ErrInvalidProducerEpoch) {
		return 0, kerr.InvalidProducerEpoch
	}
	if err != nil {
		return 0, err
	}
	return info.FirstOffset, s.l.Flush()
}

func (s storageLog) LogEndOffset() int64 { return s.l.LogEndOffset() }

func (s storageLog) Scan(from int64, fn func(record.Batch) error) (int64, error) {
	if gate := s.e.gate(s.part); gate != nil {
		<-gate
	}
	off := max(from, s.l.LogStartOffset())
	for off < s.l.LogEndOffset() {
		buf, err := s.l.Read(off, 1<<20, s.l.LogEndOffset(), true)
		if err != nil {
			return off, err
		}
		if len(buf) == 0 {
			return off, nil
		}
		it := record.IterBatches(buf)
		for it.Next() {
			b := it.Batch()
			if b.LastOffset() < off {
				continue
			}
			if err := fn(b); err != nil {
				return off, err
			}
			off = b.NextOffset()
		}
		if err := it.Err(); err != nil {
			return off, err
		}
	}
	return off, nil
}

// env holds the __consumer_offsets logs of a test "broker" under one directory, so that
// a new Coordinator over the same directory (after closeLogs) is a restart.
type env struct {
	t      *testing.T
	dir    string
	mu     sync.Mutex
	logs   map[int32]*storage.Log
	gates  map[int32]chan struct{}
	topics map[string]int32
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, dir: t.TempDir(), logs: map[int32]*storage.Log{}, gates: map[int32]chan struct{}{}, topics: map[string]int32{"t": 4, "u": 2}}
	t.Cleanup(e.closeLogs)
	return e
}

func (e *env) closeLogs() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for p, l := range e.logs {
		_ = l.Close()
		delete(e.logs, p)
	}
}

// hold makes scans of partition p wait until the returned function is called.
func (e *env) hold(p int32) (release func()) {
	ch := make(chan struct{})
	e.mu.Lock()
	e.gates[p] = ch
	e.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			delete(e.gates, p)
			e.mu.Unlock()
			close(ch)
		})
	}
}

func (e *env) gate(p int32) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gates[p]
}

// storage opens (or returns) the log of partition p.
func (e *env) storage(p int32) *storage.Log {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l, ok := e.logs[p]; ok {
		return l
	}
	l, err := storage.Open(filepath.Join(e.dir, fmt.Sprintf("%s-%d", TopicName, p)), [16]byte{1}, storage.DefaultConfig(), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.logs[p] = l
	return l
}

// marker appends a COMMIT or ABORT marker of pid to partition p, as the broker's marker
// writer does, and tells c (when not nil) as the broker does.
func (e *env) marker(c *Coordinator, p int32, pid int64, epoch int16, commit bool) {
	e.t.Helper()
	typ := record.ControlAbort
	if commit {
		typ = record.ControlCommit
	}
	l := e.storage(p)
	if _, err := l.AppendControlAsLeader(record.BuildEndTxnMarker(typ, pid, epoch, 0, 0, time.Now().UnixMilli()), 0); err != nil {
		e.t.Fatal(err)
	}
	if c != nil {
		c.CompleteTxn(p, pid, commit)
	}
}

func (e *env) opts() Options {
	return Options{
		NumPartitions:            3,
		GroupMinSessionTimeoutMs: 10,
		Log: func(p int32) (PartitionLog, error) {
			return storageLog{e.storage(p), e, p}, nil
		},
		TopicPartitionExists: func(topic string, p int32) bool {
			n, ok := e.topics[topic]
			return ok && p >= 0 && p < n
		},
	}
}

// start returns a coordinator that has loaded every partition (the single-node
// broker's start-up); mod adjusts the options.
func (e *env) start(mod func(*Options)) *Coordinator {
	o := e.opts()
	if mod != nil {
		mod(&o)
	}
	c := New(o)
	e.t.Cleanup(c.Close)
	for p := int32(0); p < o.NumPartitions; p++ {
		c.OnElection(p, 0)
	}
	if err := c.AwaitLoaded(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return c
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return fmt.Sprint(code)
}

func wantErr(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: got %s, want %s", what, errName(got), errName(w))
	}
}

func str(s string) *string { return &s }

// consumerMeta is a ConsumerProtocolSubscription for topics.
func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = topics
	return m.AppendTo(nil)
}

type joinOpts struct {
	memberID, instance string
	session, rebalance int32
	ptype              string
	protocols          []kmsg.JoinGroupRequestProtocol
	version            int16
}

func joinReq(groupID string, o joinOpts) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	if o.version != 0 {
		r.Version = o.version
	}
	r.Group = groupID
	r.MemberID = o.memberID
	if o.instance != "" {
		r.InstanceID = str(o.instance)
	}
	r.SessionTimeoutMillis = 10000
	if o.session != 0 {
		r.SessionTimeoutMillis = o.session
	}
	r.RebalanceTimeoutMillis = 10000
	if o.rebalance != 0 {
		r.RebalanceTimeoutMillis = o.rebalance
	}
	r.ProtocolType = "consumer"
	if o.ptype != "" {
		r.ProtocolType = o.ptype
	}
	r.Protocols = o.protocols
	if r.Protocols == nil {
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMeta("t")}}
	}
	return r
}

// joinAsync sends JoinGroup in a goroutine; the response arrives on the channel.
func joinAsync(c *Coordinator, req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		ctx := WithClient(context.Background(), "client-"+req.Group, "/127.0.0.1")
		ch <- c.JoinGroup(ctx, req)
	}()
	return ch
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatal("no response (deadline exceeded)")
		panic("unreachable")
	}
}

// joinDynamic performs the v4+ two-step join of a new dynamic member and returns the
// channel of its second JoinGroup.
func joinDynamic(t *testing.T, c *Coordinator, groupID string, o joinOpts) <-chan *kmsg.JoinGroupResponse {
	t.Helper()
	r := recv(t, joinAsync(c, joinReq(groupID, o)))
	wantErr(t, "first join", r.ErrorCode, kerr.MemberIDRequired)
	if r.MemberID == "" {
		t.Fatal("MEMBER_ID_REQUIRED without a member ID")
	}
	o.memberID = r.MemberID
	return joinAsync(c, joinReq(groupID, o))
}

func syncAsync(c *Coordinator, groupID, memberID string, gen int32, instance string, assign map[string][]byte) <-chan *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.Generation = groupID, memberID, gen
	if instance != "" {
		r.InstanceID = str(instance)
	}
	r.ProtocolType, r.Protocol = str("consumer"), str("range")
	for m, a := range assign {
		r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: a})
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- c.SyncGroup(context.Background(), r) }()
	return ch
}

func heartbeat(c *Coordinator, groupID, memberID string, gen int32, instance string) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = groupID, memberID, gen
	if instance != "" {
		r.InstanceID = str(instance)
	}
	return c.Heartbeat(context.Background(), r).ErrorCode
}

func commit(c *Coordinator, version int16, groupID, memberID string, gen int32, topic string, part int32, offset int64, instance ...string) int16 {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = version
	r.Group, r.MemberID, r.Generation = groupID, memberID, gen
	if len(instance) > 0 {
		r.InstanceID = str(instance[0])
	}
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = part, offset, 7, str("meta")
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic, t.Partitions = topic, []kmsg.OffsetCommitRequestTopicPartition{p}
	r.Topics = []kmsg.OffsetCommitRequestTopic{t}
	resp := c.OffsetCommit(context.Background(), r)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetch returns the committed offset of one partition (OffsetFetch v8).
func fetch(t *testing.T, c *Coordinator, groupID, topic string, part int32) kmsg.OffsetFetchResponseGroupTopicPartition {
	t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = groupID
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{part}}}
	r.Groups = []kmsg.OffsetFetchRequestGroup{g}
	resp := c.OffsetFetch(context.Background(), r)
	wantErr(t, "offset fetch", resp.Groups[0].ErrorCode, nil)
	return resp.Groups[0].Topics[0].Partitions[0]
}

func describe(c *Coordinator, groupID string) kmsg.DescribeGroupsResponseGroup {
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = 5
	r.Groups = []string{groupID}
	return c.DescribeGroups(context.Background(), r).Groups[0]
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached before the deadline", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stableTwo brings group g to Stable with two dynamic members A (leader) and B, and
// returns their member IDs and the generation.
func stableTwo(t *testing.T, c *Coordinator, g string, o joinOpts) (a, b string, gen int32) {
	t.Helper()
	ra := recv(t, joinDynamic(t, c, g, o))
	wantErr(t, "join A", ra.ErrorCode, nil)
	a = ra.MemberID
	sa := recv(t, syncAsync(c, g, a, ra.Generation, "", map[string][]byte{a: []byte("all")}))
	wantErr(t, "sync A", sa.ErrorCode, nil)

	chB := joinDynamic(t, c, g, o)
	eventually(t, "rebalance announced to A", func() bool {
		return heartbeat(c, g, a, ra.Generation, "") == kerr.RebalanceInProgress.Code
	})
	oa := o
	oa.memberID = a
	ra2 := recv(t, joinAsync(c, joinReq(g, oa)))
	rb := recv(t, chB)
	wantErr(t, "rejoin A", ra2.ErrorCode, nil)
	wantErr(t, "join B", rb.ErrorCode, nil)
	if ra2.Generation != ra.Generation+1 || rb.Generation != ra2.Generation {
		t.Fatalf("generations: A %d -> %d, B %d", ra.Generation, ra2.Generation, rb.Generation)
	}
	if ra2.LeaderID != a || len(ra2.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("leader %q (A %q), leader members %d, follower members %d", ra2.LeaderID, a, len(ra2.Members), len(rb.Members))
	}
	b, gen = rb.MemberID, rb.Generation
	chSB := syncAsync(c, g, b, gen, "", nil)
	sa2 := recv(t, syncAsync(c, g, a, gen, "", map[string][]byte{a: []byte("pa"), b: []byte("pb")}))
	sb := recv(t, chSB)
	wantErr(t, "sync A", sa2.ErrorCode, nil)
	wantErr(t, "sync B", sb.ErrorCode, nil)
	if string(sa2.MemberAssignment) != "pa" || string(sb.MemberAssignment) != "pb" {
		t.Fatalf("assignments %q %q", sa2.MemberAssignment, sb.MemberAssignment)
	}
	return a, b, gen
}
