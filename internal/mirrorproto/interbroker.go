package mirrorproto

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the inter-broker mirror RPCs (spec section 10):
// ReadMirrorStates and WriteMirrorStates, served by the coordinator of a
// `__mirror_state` partition, and BumpLeaderEpochs, served by partition
// leaders. Callers need CLUSTER_ACTION on the Cluster (spec section 14).

// MirrorState is one persisted mirror partition state record (spec section
// 4), keyed by (MirrorName, TopicID, Partition). StateEpoch grows on every
// transition and fences stale writers; LeaderEpoch is the writer's leader
// epoch of the mirror partition. RetryAttempt is -1 for non-retryable
// FAILED. LastMirrorEpoch/LastMirrorOffset are the last mirror position, -1
// when none.
type MirrorState struct {
	MirrorName       string
	TopicID          [16]byte
	Partition        int32
	State            State
	PreviousState    State
	StateEpoch       int32
	LeaderEpoch      int32
	RetryAttempt     int32
	ErrorMessage     *string
	LastMirrorEpoch  int32
	LastMirrorOffset int64
	// Record is kmirror's whole state record (its JSON form in __mirror_state, with the
	// truncation and skip reports the fields above do not carry); tagged field 0 of the
	// entries that carry a state, nil when not sent. When set it is the record.
	Record []byte
}

// recordTag encodes MirrorState.Record as tagged field 0 (nil: left out).
func recordTag(s *MirrorState) []byte {
	if s.Record == nil {
		return nil
	}
	return field(func(w *writer) { w.b = kbin.AppendCompactBytes(w.b, s.Record) })
}

// readRecordTag reads the tagged fields after a MirrorState.
func readRecordTag(r *reader, s *MirrorState) {
	r.tags(func(tag uint32, f *reader) {
		if tag == 0 {
			s.Record = f.CompactBytes()
		}
	})
}

func writeMirrorState(w *writer, s *MirrorState) {
	w.str(s.MirrorName)
	w.uuid(s.TopicID)
	w.i32(s.Partition)
	w.i8(int8(s.State))
	w.i8(int8(s.PreviousState))
	w.i32(s.StateEpoch)
	w.i32(s.LeaderEpoch)
	w.i32(s.RetryAttempt)
	w.nstr(s.ErrorMessage)
	w.i32(s.LastMirrorEpoch)
	w.i64(s.LastMirrorOffset)
}

func readMirrorState(r *reader, s *MirrorState) {
	s.MirrorName = r.str()
	s.TopicID = r.uuid()
	s.Partition = r.i32()
	s.State = State(r.i8())
	s.PreviousState = State(r.i8())
	s.StateEpoch = r.i32()
	s.LeaderEpoch = r.i32()
	s.RetryAttempt = r.i32()
	s.ErrorMessage = r.nstr()
	s.LastMirrorEpoch = r.i32()
	s.LastMirrorOffset = r.i64()
}

// MirrorStateTopic selects partitions of one topic; Partitions empty = all.
type MirrorStateTopic struct {
	TopicID    [16]byte
	Partitions []int32
}

// --- ReadMirrorStates (prototype key 100) ---

// ReadMirrorStatesRequest reads state records from the coordinator. Mirrors
// empty = every record the coordinator holds; a mirror with Topics empty =
// all its records there.
type ReadMirrorStatesRequest struct {
	Versioned
	Mirrors []ReadMirrorStatesRequestMirror
}

// ReadMirrorStatesRequestMirror selects the records of one mirror.
type ReadMirrorStatesRequestMirror struct {
	MirrorName string
	Topics     []MirrorStateTopic
}

// Key returns the served key, 1100.
func (*ReadMirrorStatesRequest) Key() int16 { return ServedKey(protoReadMirrorStates) }

// ResponseKind returns an empty ReadMirrorStatesResponse.
func (v *ReadMirrorStatesRequest) ResponseKind() kmsg.Response {
	return &ReadMirrorStatesResponse{Versioned: v.Versioned}
}

// AppendTo appends the request body.
func (v *ReadMirrorStatesRequest) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	writeArray(w, v.Mirrors, func(w *writer, m *ReadMirrorStatesRequestMirror) {
		w.str(m.MirrorName)
		writeArray(w, m.Topics, func(w *writer, t *MirrorStateTopic) {
			w.uuid(t.TopicID)
			w.i32s(t.Partitions)
			w.noTags()
		})
		w.noTags()
	})
	w.noTags()
	return w.b
}

// ReadFrom decodes the request body.
func (v *ReadMirrorStatesRequest) ReadFrom(src []byte) error {
	*v = ReadMirrorStatesRequest{Versioned: v.Versioned}
	r := newReader(src)
	v.Mirrors = readArray(r, func(r *reader, m *ReadMirrorStatesRequestMirror) {
		m.MirrorName = r.str()
		m.Topics = readArray(r, func(r *reader, t *MirrorStateTopic) {
			t.TopicID = r.uuid()
			t.Partitions = r.i32s()
			r.skipTags()
		})
		r.skipTags()
	})
	r.skipTags()
	return r.Complete()
}

// ReadMirrorStatesResponse answers ReadMirrorStates. A requested partition
// this broker does not coordinate comes back with NOT_COORDINATOR and only
// its key fields set; one without a record with State UNKNOWN.
type ReadMirrorStatesResponse struct {
	Versioned
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	States         []ReadMirrorStatesResponseState
}

// ReadMirrorStatesResponseState is one state record with its read error.
type ReadMirrorStatesResponseState struct {
	ErrorCode int16
	MirrorState
}

// Key returns the served key, 1100.
func (*ReadMirrorStatesResponse) Key() int16 { return ServedKey(protoReadMirrorStates) }

// RequestKind returns an empty ReadMirrorStatesRequest.
func (v *ReadMirrorStatesResponse) RequestKind() kmsg.Request {
	return &ReadMirrorStatesRequest{Versioned: v.Versioned}
}

// AppendTo appends the response body.
func (v *ReadMirrorStatesResponse) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.i32(v.ThrottleTimeMs)
	w.i16(v.ErrorCode)
	w.nstr(v.ErrorMessage)
	writeArray(w, v.States, func(w *writer, s *ReadMirrorStatesResponseState) {
		w.i16(s.ErrorCode)
		writeMirrorState(w, &s.MirrorState)
		w.tags(recordTag(&s.MirrorState))
	})
	w.noTags()
	return w.b
}

// ReadFrom decodes the response body.
func (v *ReadMirrorStatesResponse) ReadFrom(src []byte) error {
	*v = ReadMirrorStatesResponse{Versioned: v.Versioned}
	r := newReader(src)
	v.ThrottleTimeMs = r.i32()
	v.ErrorCode = r.i16()
	v.ErrorMessage = r.nstr()
	v.States = readArray(r, func(r *reader, s *ReadMirrorStatesResponseState) {
		s.ErrorCode = r.i16()
		readMirrorState(r, &s.MirrorState)
		readRecordTag(r, &s.MirrorState)
	})
	r.skipTags()
	return r.Complete()
}

// --- WriteMirrorStates (prototype key 101) ---

// WriteMirrorStatesRequest writes state records to the coordinator, fenced
// by leader epoch and state epoch: a record whose LeaderEpoch is below the
// stored one is refused with FENCED_LEADER_EPOCH, one whose StateEpoch is
// not above the stored one with INVALID_CLUSTER_MIRROR_STATES. Tombstone
// deletes the record (mirror deletion).
type WriteMirrorStatesRequest struct {
	Versioned
	States []WriteMirrorStatesRequestState
}

// WriteMirrorStatesRequestState is one record to write.
type WriteMirrorStatesRequestState struct {
	MirrorState
	Tombstone bool
}

// Key returns the served key, 1101.
func (*WriteMirrorStatesRequest) Key() int16 { return ServedKey(protoWriteMirrorStates) }

// ResponseKind returns an empty WriteMirrorStatesResponse.
func (v *WriteMirrorStatesRequest) ResponseKind() kmsg.Response {
	return &WriteMirrorStatesResponse{Versioned: v.Versioned}
}

// AppendTo appends the request body.
func (v *WriteMirrorStatesRequest) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	writeArray(w, v.States, func(w *writer, s *WriteMirrorStatesRequestState) {
		writeMirrorState(w, &s.MirrorState)
		w.bool(s.Tombstone)
		w.tags(recordTag(&s.MirrorState))
	})
	w.noTags()
	return w.b
}

// ReadFrom decodes the request body.
func (v *WriteMirrorStatesRequest) ReadFrom(src []byte) error {
	*v = WriteMirrorStatesRequest{Versioned: v.Versioned}
	r := newReader(src)
	v.States = readArray(r, func(r *reader, s *WriteMirrorStatesRequestState) {
		readMirrorState(r, &s.MirrorState)
		s.Tombstone = r.bool()
		readRecordTag(r, &s.MirrorState)
	})
	r.skipTags()
	return r.Complete()
}

// WriteMirrorStatesResponse answers WriteMirrorStates, one result per record.
type WriteMirrorStatesResponse struct {
	Versioned
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	Results        []WriteMirrorStatesResponseResult
}

// WriteMirrorStatesResponseResult is the outcome for one record. StateEpoch
// is the state epoch stored after the write (the current one on refusal).
// Errors: NOT_COORDINATOR, FENCED_LEADER_EPOCH, INVALID_CLUSTER_MIRROR_STATES.
type WriteMirrorStatesResponseResult struct {
	MirrorName   string
	TopicID      [16]byte
	Partition    int32
	ErrorCode    int16
	ErrorMessage *string
	StateEpoch   int32
}

// Key returns the served key, 1101.
func (*WriteMirrorStatesResponse) Key() int16 { return ServedKey(protoWriteMirrorStates) }

// RequestKind returns an empty WriteMirrorStatesRequest.
func (v *WriteMirrorStatesResponse) RequestKind() kmsg.Request {
	return &WriteMirrorStatesRequest{Versioned: v.Versioned}
}

// AppendTo appends the response body.
func (v *WriteMirrorStatesResponse) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.i32(v.ThrottleTimeMs)
	w.i16(v.ErrorCode)
	w.nstr(v.ErrorMessage)
	writeArray(w, v.Results, func(w *writer, s *WriteMirrorStatesResponseResult) {
		w.str(s.MirrorName)
		w.uuid(s.TopicID)
		w.i32(s.Partition)
		w.i16(s.ErrorCode)
		w.nstr(s.ErrorMessage)
		w.i32(s.StateEpoch)
		w.noTags()
	})
	w.noTags()
	return w.b
}

// ReadFrom decodes the response body.
func (v *WriteMirrorStatesResponse) ReadFrom(src []byte) error {
	*v = WriteMirrorStatesResponse{Versioned: v.Versioned}
	r := newReader(src)
	v.ThrottleTimeMs = r.i32()
	v.ErrorCode = r.i16()
	v.ErrorMessage = r.nstr()
	v.Results = readArray(r, func(r *reader, s *WriteMirrorStatesResponseResult) {
		s.MirrorName = r.str()
		s.TopicID = r.uuid()
		s.Partition = r.i32()
		s.ErrorCode = r.i16()
		s.ErrorMessage = r.nstr()
		s.StateEpoch = r.i32()
		r.skipTags()
	})
	r.skipTags()
	return r.Complete()
}

// --- BumpLeaderEpochs (prototype key 105) ---

// BumpLeaderEpochsRequest asks partition leaders to raise each partition's
// leader epoch to at least MinLeaderEpoch (EPOCH_FENCING and failover, spec
// sections 5 and 6).
type BumpLeaderEpochsRequest struct {
	Versioned
	Topics []BumpLeaderEpochsRequestTopic
}

// BumpLeaderEpochsRequestTopic is one topic's partitions to raise.
type BumpLeaderEpochsRequestTopic struct {
	TopicID    [16]byte
	Partitions []BumpLeaderEpochsRequestPartition
}

// BumpLeaderEpochsRequestPartition is one partition and its minimum epoch.
type BumpLeaderEpochsRequestPartition struct {
	PartitionIndex int32
	MinLeaderEpoch int32
}

// Key returns the served key, 1105.
func (*BumpLeaderEpochsRequest) Key() int16 { return ServedKey(protoBumpLeaderEpochs) }

// ResponseKind returns an empty BumpLeaderEpochsResponse.
func (v *BumpLeaderEpochsRequest) ResponseKind() kmsg.Response {
	return &BumpLeaderEpochsResponse{Versioned: v.Versioned}
}

// AppendTo appends the request body.
func (v *BumpLeaderEpochsRequest) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	writeArray(w, v.Topics, func(w *writer, t *BumpLeaderEpochsRequestTopic) {
		w.uuid(t.TopicID)
		writeArray(w, t.Partitions, func(w *writer, p *BumpLeaderEpochsRequestPartition) {
			w.i32(p.PartitionIndex)
			w.i32(p.MinLeaderEpoch)
			w.noTags()
		})
		w.noTags()
	})
	w.noTags()
	return w.b
}

// ReadFrom decodes the request body.
func (v *BumpLeaderEpochsRequest) ReadFrom(src []byte) error {
	*v = BumpLeaderEpochsRequest{Versioned: v.Versioned}
	r := newReader(src)
	v.Topics = readArray(r, func(r *reader, t *BumpLeaderEpochsRequestTopic) {
		t.TopicID = r.uuid()
		t.Partitions = readArray(r, func(r *reader, p *BumpLeaderEpochsRequestPartition) {
			p.PartitionIndex = r.i32()
			p.MinLeaderEpoch = r.i32()
			r.skipTags()
		})
		r.skipTags()
	})
	r.skipTags()
	return r.Complete()
}

// BumpLeaderEpochsResponse answers BumpLeaderEpochs.
type BumpLeaderEpochsResponse struct {
	Versioned
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []BumpLeaderEpochsResponseTopic
}

// BumpLeaderEpochsResponseTopic is one topic's results.
type BumpLeaderEpochsResponseTopic struct {
	TopicID    [16]byte
	Partitions []BumpLeaderEpochsResponsePartition
}

// BumpLeaderEpochsResponsePartition is one partition's result: the leader
// epoch now in force. Errors: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_ID.
type BumpLeaderEpochsResponsePartition struct {
	PartitionIndex int32
	ErrorCode      int16
	LeaderEpoch    int32
}

// Key returns the served key, 1105.
func (*BumpLeaderEpochsResponse) Key() int16 { return ServedKey(protoBumpLeaderEpochs) }

// RequestKind returns an empty BumpLeaderEpochsRequest.
func (v *BumpLeaderEpochsResponse) RequestKind() kmsg.Request {
	return &BumpLeaderEpochsRequest{Versioned: v.Versioned}
}

// AppendTo appends the response body.
func (v *BumpLeaderEpochsResponse) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.i32(v.ThrottleTimeMs)
	w.i16(v.ErrorCode)
	w.nstr(v.ErrorMessage)
	writeArray(w, v.Topics, func(w *writer, t *BumpLeaderEpochsResponseTopic) {
		w.uuid(t.TopicID)
		writeArray(w, t.Partitions, func(w *writer, p *BumpLeaderEpochsResponsePartition) {
			w.i32(p.PartitionIndex)
			w.i16(p.ErrorCode)
			w.i32(p.LeaderEpoch)
			w.noTags()
		})
		w.noTags()
	})
	w.noTags()
	return w.b
}

// ReadFrom decodes the response body.
func (v *BumpLeaderEpochsResponse) ReadFrom(src []byte) error {
	*v = BumpLeaderEpochsResponse{Versioned: v.Versioned}
	r := newReader(src)
	v.ThrottleTimeMs = r.i32()
	v.ErrorCode = r.i16()
	v.ErrorMessage = r.nstr()
	v.Topics = readArray(r, func(r *reader, t *BumpLeaderEpochsResponseTopic) {
		t.TopicID = r.uuid()
		t.Partitions = readArray(r, func(r *reader, p *BumpLeaderEpochsResponsePartition) {
			p.PartitionIndex = r.i32()
			p.ErrorCode = r.i16()
			p.LeaderEpoch = r.i32()
			r.skipTags()
		})
		r.skipTags()
	})
	r.skipTags()
	return r.Complete()
}
