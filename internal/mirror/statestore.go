package mirror

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/record"
)

// StateTopic is the compacted internal topic holding mirror partition states (spec
// section 4).
const StateTopic = "__mirror_state"

// stateStore persists mirror partition states in __mirror_state. Records are keyed by
// (mirror name, topic ID, partition); the partition of a key is FNV-1a(key) mod the
// partition count, and the leader of that partition is the key's state coordinator
// (cluster.md §3): it holds the latest record of every key of its partition in memory,
// loaded when it becomes leader, and serves reads and writes — its own, and other
// brokers' through ReadMirrorStates and WriteMirrorStates. Writes are fenced: a record
// with a leader epoch below the stored one, or with an equal leader epoch and a lower
// state epoch, is refused (a writer that lost the leadership of the mirror partition).
// The value is a versioned JSON stateRecord; a nil value (tombstone) deletes the key.
type stateStore struct {
	local Local

	mu    sync.Mutex
	parts map[int32]*statePartition // __mirror_state partitions this broker coordinates
}

// stateWriteTimeout bounds a state record's acks=all write (Kafka's coordinators use
// offsets.commit.timeout.ms, 5 s, for theirs).
const stateWriteTimeout = 5 * time.Second

// statePartition is one coordinated partition of __mirror_state.
type statePartition struct {
	epoch   int32 // the leader epoch it was elected with
	loaded  chan struct{}
	err     error // the load's, valid once loaded is closed
	mu      sync.Mutex
	records map[stateKey]*stateRecord
}

// Errors of the state store, as the mirror RPCs answer them.
var (
	// errNotStateCoordinator: this broker does not coordinate the key's partition
	// (NOT_COORDINATOR); the writer asks its leader.
	errNotStateCoordinator = errors.New("NOT_COORDINATOR: not the coordinator of this __mirror_state partition")
	// errStateLoading: the partition is being loaded (COORDINATOR_LOAD_IN_PROGRESS).
	errStateLoading = errors.New("COORDINATOR_LOAD_IN_PROGRESS: the __mirror_state partition is loading")
	// errStateFenced: the record's writer lost the leadership of the mirror partition, or
	// wrote an older state (FENCED_LEADER_EPOCH / INVALID_CLUSTER_MIRROR_STATES).
	errStateFenced = errors.New("FENCED_LEADER_EPOCH: the mirror state was written by a newer leader")
)

// partitions is the partition count of __mirror_state, 0 while it does not exist.
func (s *stateStore) partitions() int32 {
	if t, ok := s.local.Metadata().Image().Topic(StateTopic); ok {
		return t.Partitions
	}
	return 0
}

// exists reports whether __mirror_state exists.
func (s *stateStore) exists() bool { return s.partitions() > 0 }

// ensure creates __mirror_state (cleanup.policy=compact, want partitions) when missing.
func (s *stateStore) ensure(ctx context.Context, want int32) error {
	if s.exists() {
		return nil
	}
	err := s.local.CreateTopic(ctx, StateTopic, metadata.NewTopicID(), want,
		map[string]string{"cleanup.policy": "compact"}, nil)
	if err != nil && !s.exists() { // another broker creating it at the same time is fine
		return fmt.Errorf("create %s: %w", StateTopic, err)
	}
	return nil
}

// partitionFor is the partition of __mirror_state that holds key, −1 when the topic does
// not exist.
func (s *stateStore) partitionFor(key []byte) int32 {
	n := s.partitions()
	if n == 0 {
		return -1
	}
	h := fnv.New32a()
	h.Write(key)
	return int32(h.Sum32() % uint32(n))
}

// coordinatorOf is the broker that leads partition p of __mirror_state, −1 when none.
func (s *stateStore) coordinatorOf(p int32) int32 {
	t, ok := s.local.Metadata().Image().Topic(StateTopic)
	if !ok || t.Partition(p) == nil {
		return -1
	}
	return t.Partition(p).Leader
}

// stateRetry bounds how long a read or write waits for a coordinator that is loading,
// moving or briefly unreachable.
const stateRetry = 10 * time.Second

// write persists the record of k (nil r = tombstone) at its coordinator. Errors:
// errStateFenced (the caller lost the partition), or no coordinator answered in time.
func (s *stateStore) write(k stateKey, r *stateRecord) error {
	ctx, cancel := context.WithTimeout(context.Background(), stateRetry)
	defer cancel()
	return s.retry(ctx, k, func(p int32, coord int32) error {
		if coord == s.local.NodeID() {
			return s.writeLocal(p, k, r)
		}
		return s.writeRemote(ctx, coord, k, r)
	})
}

// read returns the record of k from its coordinator (nil: none).
func (s *stateStore) read(ctx context.Context, k stateKey) (*stateRecord, error) {
	var out *stateRecord
	err := s.retry(ctx, k, func(p int32, coord int32) error {
		var err error
		if coord == s.local.NodeID() {
			out, err = s.readLocal(p, k)
		} else {
			out, err = s.readRemote(ctx, coord, k)
		}
		return err
	})
	return out, err
}

// retry runs op at k's coordinator until it succeeds, is fenced, or ctx ends; a missing
// topic is an error at once.
func (s *stateStore) retry(ctx context.Context, k stateKey, op func(p, coord int32) error) error {
	key := k.encode()
	for {
		p := s.partitionFor(key)
		if p < 0 {
			return fmt.Errorf("%s does not exist", StateTopic)
		}
		coord := s.coordinatorOf(p)
		var err error
		if coord < 0 {
			err = fmt.Errorf("%s-%d has no leader", StateTopic, p)
		} else if err = op(p, coord); err == nil || errors.Is(err, errStateFenced) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mirror state of %s: %w", k, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// elected makes this broker the coordinator of partition p of __mirror_state at leader
// epoch epoch: it loads the partition in the background (reads and writes wait for it).
func (s *stateStore) elected(p int32, epoch int32) {
	s.mu.Lock()
	if cur := s.parts[p]; cur != nil && cur.epoch >= epoch {
		s.mu.Unlock()
		return
	}
	sp := &statePartition{epoch: epoch, loaded: make(chan struct{}), records: map[stateKey]*stateRecord{}}
	if s.parts == nil {
		s.parts = map[int32]*statePartition{}
	}
	s.parts[p] = sp
	s.mu.Unlock()
	go func() {
		defer close(sp.loaded)
		sp.err = s.loadPartition(p, sp.records)
	}()
}

// resigned drops the coordination of partition p (another broker leads it now).
func (s *stateStore) resigned(p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.parts, p)
}

// awaitLoaded waits until every coordinated partition is loaded and returns the loads'
// errors.
func (s *stateStore) awaitLoaded(ctx context.Context) error {
	s.mu.Lock()
	parts := make([]*statePartition, 0, len(s.parts))
	for _, sp := range s.parts {
		parts = append(parts, sp)
	}
	s.mu.Unlock()
	var errs []error
	for _, sp := range parts {
		select {
		case <-sp.loaded:
			errs = append(errs, sp.err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// coordinated returns the loaded partition p, or errNotStateCoordinator / errStateLoading.
func (s *stateStore) coordinated(p int32) (*statePartition, error) {
	s.mu.Lock()
	sp := s.parts[p]
	s.mu.Unlock()
	if sp == nil {
		return nil, errNotStateCoordinator
	}
	select {
	case <-sp.loaded:
	default:
		return nil, errStateLoading
	}
	if sp.err != nil {
		return nil, fmt.Errorf("%w (its load failed: %v)", errStateLoading, sp.err)
	}
	return sp, nil
}

func (s *stateStore) readLocal(p int32, k stateKey) (*stateRecord, error) {
	sp, err := s.coordinated(p)
	if err != nil {
		return nil, err
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if r := sp.records[k]; r != nil {
		cp := *r
		return &cp, nil
	}
	return nil, nil
}

// writeLocal appends k's record to partition p, which this broker coordinates, after the
// fencing check, and keeps it as the latest.
func (s *stateStore) writeLocal(p int32, k stateKey, r *stateRecord) error {
	sp, err := s.coordinated(p)
	if err != nil {
		return err
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if cur := sp.records[k]; cur != nil && r != nil &&
		(r.LeaderEpoch < cur.LeaderEpoch || (r.LeaderEpoch == cur.LeaderEpoch && r.StateEpoch < cur.StateEpoch)) {
		return fmt.Errorf("%w: %s at leader epoch %d state epoch %d, stored %d/%d", errStateFenced, k, r.LeaderEpoch, r.StateEpoch, cur.LeaderEpoch, cur.StateEpoch)
	}
	part, err := s.local.Partition(StateTopic, p)
	if err != nil {
		return err
	}
	var val []byte
	if r != nil {
		val = encodeStateRecord(r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateWriteTimeout)
	defer cancel()
	if _, err := part.AppendRecordsAsLeader(ctx, []record.KV{{Key: k.encode(), Value: val}}, time.Now().UnixMilli()); err != nil {
		return err
	}
	if r == nil {
		delete(sp.records, k)
	} else {
		cp := *r
		sp.records[k] = &cp
	}
	return nil
}

// writeRemote sends k's record to coordinator coord with WriteMirrorStates.
func (s *stateStore) writeRemote(ctx context.Context, coord int32, k stateKey, r *stateRecord) error {
	req := &mirrorproto.WriteMirrorStatesRequest{}
	st := mirrorproto.WriteMirrorStatesRequestState{MirrorState: k.wire(r), Tombstone: r == nil}
	req.States = append(req.States, st)
	resp, err := s.local.BrokerRequest(ctx, coord, req)
	if err != nil {
		return err
	}
	wr := resp.(*mirrorproto.WriteMirrorStatesResponse)
	if wr.ErrorCode != 0 {
		return stateError(wr.ErrorCode, wr.ErrorMessage)
	}
	for _, ws := range wr.Results {
		if ws.ErrorCode != 0 {
			return stateError(ws.ErrorCode, ws.ErrorMessage)
		}
	}
	return nil
}

// readRemote asks coordinator coord for k's record with ReadMirrorStates.
func (s *stateStore) readRemote(ctx context.Context, coord int32, k stateKey) (*stateRecord, error) {
	req := &mirrorproto.ReadMirrorStatesRequest{Mirrors: []mirrorproto.ReadMirrorStatesRequestMirror{{
		MirrorName: k.Mirror, Topics: []mirrorproto.MirrorStateTopic{{TopicID: k.TopicID, Partitions: []int32{k.Partition}}},
	}}}
	resp, err := s.local.BrokerRequest(ctx, coord, req)
	if err != nil {
		return nil, err
	}
	rr := resp.(*mirrorproto.ReadMirrorStatesResponse)
	if rr.ErrorCode != 0 {
		return nil, stateError(rr.ErrorCode, rr.ErrorMessage)
	}
	if len(rr.States) != 1 {
		return nil, fmt.Errorf("ReadMirrorStates answered %d states for one key", len(rr.States))
	}
	rs := rr.States[0]
	switch {
	case rs.ErrorCode != 0:
		return nil, stateError(rs.ErrorCode, nil)
	case rs.Record == nil:
		return nil, nil
	}
	return decodeStateRecord(rs.Record)
}

// stateError maps a mirror state RPC's error code back to the store's errors.
func stateError(code int16, msg *string) error {
	var err error
	switch code {
	case kerr.NotCoordinator.Code:
		err = errNotStateCoordinator
	case kerr.CoordinatorLoadInProgress.Code:
		err = errStateLoading
	case kerr.FencedLeaderEpoch.Code, mirrorproto.InvalidClusterMirrorStates:
		err = errStateFenced
	default:
		err = kerr.ErrorForCode(code)
	}
	if msg != nil {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

// stateErrorCode is the code a mirror state RPC answers for err.
func stateErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errNotStateCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, errStateLoading):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, errStateFenced):
		return kerr.FencedLeaderEpoch.Code
	}
	return kerr.UnknownServerError.Code
}

// ReadMirrorStates serves the state records this broker coordinates (spec section 10,
// inter-broker, key 1100): per requested partition the record (Record holds kmirror's
// whole record), State UNKNOWN without one, NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS when this broker cannot answer for it.
func (m *Manager) ReadMirrorStates(_ context.Context, req *mirrorproto.ReadMirrorStatesRequest) *mirrorproto.ReadMirrorStatesResponse {
	resp := &mirrorproto.ReadMirrorStatesResponse{Versioned: req.Versioned}
	for _, rm := range req.Mirrors {
		for _, rt := range rm.Topics {
			for _, idx := range rt.Partitions {
				k := stateKey{Mirror: rm.MirrorName, TopicID: rt.TopicID, Partition: idx}
				p := m.store.partitionFor(k.encode())
				var rec *stateRecord
				err := errNotStateCoordinator
				if p >= 0 {
					rec, err = m.store.readLocal(p, k)
				}
				rs := mirrorproto.ReadMirrorStatesResponseState{ErrorCode: stateErrorCode(err), MirrorState: k.wire(rec)}
				resp.States = append(resp.States, rs)
			}
		}
	}
	return resp
}

// WriteMirrorStates writes state records this broker coordinates (spec section 10,
// inter-broker, key 1101), fenced by leader epoch and state epoch. Errors per state:
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, FENCED_LEADER_EPOCH, and the append's.
func (m *Manager) WriteMirrorStates(_ context.Context, req *mirrorproto.WriteMirrorStatesRequest) *mirrorproto.WriteMirrorStatesResponse {
	resp := &mirrorproto.WriteMirrorStatesResponse{Versioned: req.Versioned}
	for _, ws := range req.States {
		k := stateKey{Mirror: ws.MirrorName, TopicID: ws.TopicID, Partition: ws.Partition}
		var rec *stateRecord
		var err error
		if !ws.Tombstone {
			rec, err = recordFromWire(&ws.MirrorState)
		}
		if err == nil {
			p := m.store.partitionFor(k.encode())
			err = errNotStateCoordinator
			if p >= 0 {
				err = m.store.writeLocal(p, k, rec)
			}
		}
		res := mirrorproto.WriteMirrorStatesResponseResult{MirrorName: ws.MirrorName, TopicID: ws.TopicID, Partition: ws.Partition,
			ErrorCode: stateErrorCode(err), StateEpoch: ws.StateEpoch}
		if err != nil {
			msg := err.Error()
			res.ErrorMessage = &msg
			if res.ErrorCode == kerr.UnknownServerError.Code {
				m.log.Warn("mirror state write failed", "key", k.String(), "err", err)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}

// wire is k's record in the RPCs' form (r nil: State UNKNOWN, no Record).
func (k stateKey) wire(r *stateRecord) mirrorproto.MirrorState {
	ms := mirrorproto.MirrorState{MirrorName: k.Mirror, TopicID: k.TopicID, Partition: k.Partition,
		State: mirrorproto.StateUnknown, PreviousState: mirrorproto.StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1}
	if r == nil {
		return ms
	}
	ms.State, ms.PreviousState, ms.StateEpoch, ms.LeaderEpoch, ms.RetryAttempt = r.State, r.PrevState, r.StateEpoch, r.LeaderEpoch, r.RetryAttempt
	if r.LastError != "" {
		msg := r.LastError
		ms.ErrorMessage = &msg
	}
	ms.LastMirrorEpoch, ms.LastMirrorOffset = r.LastMirrorEpoch, r.LastMirrorOffset
	ms.Record = encodeStateRecord(r)
	return ms
}

// recordFromWire is the record an RPC carries: its Record when set (kmirror), else one
// built from the KIP's fields.
func recordFromWire(ms *mirrorproto.MirrorState) (*stateRecord, error) {
	if ms.Record != nil {
		return decodeStateRecord(ms.Record)
	}
	r := newStateRecord()
	r.State, r.PrevState, r.StateEpoch, r.LeaderEpoch, r.RetryAttempt = ms.State, ms.PreviousState, ms.StateEpoch, ms.LeaderEpoch, ms.RetryAttempt
	if ms.ErrorMessage != nil {
		r.LastError = *ms.ErrorMessage
	}
	r.LastMirrorEpoch, r.LastMirrorOffset = ms.LastMirrorEpoch, ms.LastMirrorOffset
	return r, nil
}

// loadPartition reads partition p of __mirror_state into out: the latest record per key
// (tombstoned keys absent).
func (s *stateStore) loadPartition(p int32, out map[stateKey]*stateRecord) error {
	part, err := s.local.Partition(StateTopic, p)
	if err != nil {
		return err
	}
	log := part.Log()
	off, end := log.LogStartOffset(), log.LogEndOffset()
	for off < end {
		data, err := log.Read(off, 1<<20, end, true)
		if err != nil {
			return fmt.Errorf("read %s-%d at %d: %w", StateTopic, p, off, err)
		}
		if len(data) == 0 {
			break
		}
		next := off
		for it := record.IterBatches(data); it.Next(); {
			b := it.Batch()
			next = b.NextOffset()
			if b.IsControl() {
				continue
			}
			ri := record.IterRecords(b)
			for ri.Next() {
				r := ri.Record()
				k, err := decodeStateKey(r.Key)
				if err != nil {
					continue
				}
				if r.Value == nil {
					delete(out, k)
					continue
				}
				v, err := decodeStateRecord(r.Value)
				if err != nil {
					continue
				}
				out[k] = v
			}
			if err := ri.Err(); err != nil {
				return fmt.Errorf("%s-%d at %d: %w", StateTopic, p, b.BaseOffset(), err)
			}
		}
		if next <= off {
			break
		}
		off = next
	}
	return nil
}
