package txn

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/record"
	"github.com/kmirror/kmirror/internal/storage"
)

// env is a test "broker": real storage logs under one directory (a new env over the
// same directory after closeLogs is a restart), a group coordinator over its
// __consumer_offsets partitions and a transaction coordinator over its
// __transaction_state partitions, the marker writer appending to the logs as the
// broker's does.
type env struct {
	t   *testing.T
	dir string

	mu    sync.Mutex
	logs  map[string]*storage.Log
	gates map[int32]chan struct{}

	pid         atomic.Int64
	failMarkers atomic.Bool

	groups *group.Coordinator
	txns   *Coordinator
}

const (
	txnPartitions   = 3
	groupPartitions = 3
)

func newEnv(t *testing.T, dir string) *env {
	e := &env{t: t, dir: dir, logs: map[string]*storage.Log{}, gates: map[int32]chan struct{}{}}
	e.pid.Store(1000)
	t.Cleanup(e.closeLogs)
	return e
}

// log opens (or returns) the log of topic-partition.
func (e *env) log(topic string, p int32) *storage.Log {
	e.mu.Lock()
	defer e.mu.Unlock()
	name := fmt.Sprintf("%s-%d", topic, p)
	if l, ok := e.logs[name]; ok {
		return l
	}
	l, err := storage.Open(filepath.Join(e.dir, name), [16]byte{2}, storage.DefaultConfig(), nil)
	if err != nil {
		panic(err)
	}
	e.logs[name] = l
	return l
}

func (e *env) closeLogs() {
	if e.txns != nil {
		e.txns.Close()
	}
	if e.groups != nil {
		e.groups.Close()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, l := range e.logs {
		_ = l.Close()
		delete(e.logs, name)
	}
}

// hold makes scans of __transaction_state partition p wait until release is called.
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

// logAdapter is the broker's internalLog over a storage log.
type logAdapter struct {
	l    *storage.Log
	gate func() chan struct{}
}

func (a logAdapter) Append(recs []record.KV) (int64, error) {
	b := record.Build(record.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Timestamp: time.Now().UnixMilli()}, recs)
	info, err := a.l.AppendAsLeader(b, a.l.LeaderEpoch(), -1)
	return info.FirstOffset, err
}

func (a logAdapter) AppendTransactional(recs []record.KV, pid int64, epoch int16) (int64, error) {
	b := record.Build(record.BatchHeader{Attributes: record.TransactionalBit, ProducerID: pid, ProducerEpoch: epoch,
		BaseSequence: 0, Timestamp: time.Now().UnixMilli()}, recs)
	info, err := a.l.AppendAsCoordinator(b, a.l.LeaderEpoch())
	if errors.Is(err, storage.ErrInvalidProducerEpoch) {
		return -1, kerr.InvalidProducerEpoch
	}
	return info.FirstOffset, err
}

func (a logAdapter) LogEndOffset() int64 { return a.l.LogEndOffset() }

func (a logAdapter) Scan(from int64, fn func(record.Batch) error) (int64, error) {
	if a.gate != nil {
		if g := a.gate(); g != nil {
			<-g
		}
	}
	off := max(from, a.l.LogStartOffset())
	for off < a.l.LogEndOffset() {
		buf, err := a.l.Read(off, 1<<20, a.l.LogEndOffset(), true)
		if err != nil || len(buf) == 0 {
			return off, err
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

// markers is the broker's marker writer over the env's logs.
type markers struct{ e *env }

func (m markers) WriteMarker(mk Marker) error {
	if m.e.failMarkers.Load() {
		return errors.New("marker write failed (test)")
	}
	typ := record.ControlAbort
	if mk.Commit {
		typ = record.ControlCommit
	}
	l := m.e.log(mk.Partition.Topic, mk.Partition.Partition)
	le := l.LeaderEpoch()
	_, err := l.AppendControlAsLeader(record.BuildEndTxnMarker(typ, mk.ProducerID, mk.ProducerEpoch, le, mk.CoordinatorEpoch, time.Now().UnixMilli()), le)
	if errors.Is(err, storage.ErrInvalidProducerEpoch) {
		return nil
	}
	if err == nil && mk.Partition.Topic == group.TopicName {
		m.e.groups.CompleteTxn(mk.Partition.Partition, mk.ProducerID, mk.Commit)
	}
	return err
}

// start builds both coordinators; with elect, every partition is elected at epoch and
// loaded (the single-node broker's start-up).
func (e *env) start(elect bool, epoch int32) {
	e.t.Helper()
	e.groups = group.New(group.Options{
		NumPartitions: groupPartitions,
		Log: func(p int32) (group.PartitionLog, error) {
			return logAdapter{l: e.log(group.TopicName, p)}, nil
		},
	})
	e.txns = New(Options{
		NumPartitions: txnPartitions,
		Log: func(p int32) (StateLog, error) {
			return logAdapter{l: e.log(TopicName, p), gate: func() chan struct{} { return e.gate(p) }}, nil
		},
		NewProducerID: func() (int64, error) { return e.pid.Add(1), nil },
		Markers:       markers{e},
		Groups:        e.groups,
	})
	if !elect {
		return
	}
	for p := int32(0); p < groupPartitions; p++ {
		e.groups.OnElection(p, epoch)
	}
	for p := int32(0); p < txnPartitions; p++ {
		e.txns.OnElection(p, epoch)
	}
	if err := e.groups.AwaitLoaded(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	if err := e.txns.AwaitLoaded(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// restart closes both coordinators and the logs, then starts again over the same
// directory with every partition elected.
func (e *env) restart() {
	e.t.Helper()
	e.closeLogs()
	e.start(true, 0)
}

// txnOffsetCommit sends a TxnOffsetCommit v3 (no member checks) of one partition
// through the group coordinator, verified by the transaction coordinator as the broker
// does.
func (e *env) txnOffsetCommit(id string, pid int64, epoch int16, groupID, topic string, part int32, offset int64) int16 {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = id, groupID, pid, epoch, -1
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: part, Offset: offset, LeaderEpoch: -1}}}}
	verify := func(fn func()) int16 {
		if err := e.txns.WithTxnOffsetCommit(id, pid, epoch, e.groups.PartitionFor(groupID), fn); err != nil {
			return err.Code
		}
		return 0
	}
	return e.groups.TxnOffsetCommit(context.Background(), req, verify).Topics[0].Partitions[0].ErrorCode
}

// committed is the group's committed offset of topic-part, or −1.
func (e *env) committed(groupID, topic string, part int32) int64 {
	if o, ok := e.groups.CommittedOffsets(groupID)[topic][part]; ok {
		return o.Offset
	}
	return -1
}

// idOn returns a transactional ID of __transaction_state partition p.
func idOn(prefix string, p int32) string {
	for i := 0; ; i++ {
		if id := fmt.Sprintf("%s%d", prefix, i); PartitionFor(id, txnPartitions) == p {
			return id
		}
	}
}

func wantKerr(t *testing.T, what string, got, want *kerr.Error) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func mustInit(t *testing.T, c *Coordinator, id string) (int64, int16) {
	t.Helper()
	pid, epoch, e := c.InitProducerID(id, 60000, -1, -1)
	if e != nil {
		t.Fatalf("InitProducerID(%s): %v", id, e)
	}
	return pid, epoch
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
