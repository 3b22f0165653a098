package mirrorproto

import "github.com/twmb/franz-go/pkg/kmsg"

// This file holds the read-only admin RPCs: ListClusterMirrors and
// DescribeClusterMirrors (spec section 10).

// --- ListClusterMirrors (prototype key 98) ---

// ListClusterMirrorsRequest lists the mirrors the caller may describe;
// IncludeTopicNames asks for each mirror's topic names.
type ListClusterMirrorsRequest struct {
	Versioned
	IncludeTopicNames bool
}

// Key returns the served key, 1098.
func (*ListClusterMirrorsRequest) Key() int16 { return ServedKey(protoListClusterMirrors) }

// ResponseKind returns an empty ListClusterMirrorsResponse.
func (v *ListClusterMirrorsRequest) ResponseKind() kmsg.Response {
	return &ListClusterMirrorsResponse{Versioned: v.Versioned}
}

// AppendTo appends the request body.
func (v *ListClusterMirrorsRequest) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.bool(v.IncludeTopicNames)
	w.noTags()
	return w.b
}

// ReadFrom decodes the request body.
func (v *ListClusterMirrorsRequest) ReadFrom(src []byte) error {
	*v = ListClusterMirrorsRequest{Versioned: v.Versioned}
	r := newReader(src)
	v.IncludeTopicNames = r.bool()
	r.skipTags()
	return r.Complete()
}

// ListClusterMirrorsResponse answers ListClusterMirrors.
type ListClusterMirrorsResponse struct {
	Versioned
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	Mirrors        []ListClusterMirrorsResponseMirror
}

// ListClusterMirrorsResponseMirror is one mirror. SourceClusterID is empty
// when not yet resolved; TopicNames is filled only with IncludeTopicNames.
type ListClusterMirrorsResponseMirror struct {
	MirrorName      string
	SourceBootstrap string // the mirror's bootstrap.servers
	SourceClusterID string
	TopicCount      int32
	TopicNames      []string
}

// Key returns the served key, 1098.
func (*ListClusterMirrorsResponse) Key() int16 { return ServedKey(protoListClusterMirrors) }

// RequestKind returns an empty ListClusterMirrorsRequest.
func (v *ListClusterMirrorsResponse) RequestKind() kmsg.Request {
	return &ListClusterMirrorsRequest{Versioned: v.Versioned}
}

// AppendTo appends the response body.
func (v *ListClusterMirrorsResponse) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.i32(v.ThrottleTimeMs)
	w.i16(v.ErrorCode)
	w.nstr(v.ErrorMessage)
	writeArray(w, v.Mirrors, func(w *writer, m *ListClusterMirrorsResponseMirror) {
		w.str(m.MirrorName)
		w.str(m.SourceBootstrap)
		w.str(m.SourceClusterID)
		w.i32(m.TopicCount)
		w.strs(m.TopicNames)
		w.noTags()
	})
	w.noTags()
	return w.b
}

// ReadFrom decodes the response body.
func (v *ListClusterMirrorsResponse) ReadFrom(src []byte) error {
	*v = ListClusterMirrorsResponse{Versioned: v.Versioned}
	r := newReader(src)
	v.ThrottleTimeMs = r.i32()
	v.ErrorCode = r.i16()
	v.ErrorMessage = r.nstr()
	v.Mirrors = readArray(r, func(r *reader, m *ListClusterMirrorsResponseMirror) {
		m.MirrorName = r.str()
		m.SourceBootstrap = r.str()
		m.SourceClusterID = r.str()
		m.TopicCount = r.i32()
		m.TopicNames = r.strs()
		r.skipTags()
	})
	r.skipTags()
	return r.Complete()
}

// --- DescribeClusterMirrors (prototype key 99) ---

// DescribeClusterMirrorsRequest describes mirrors and their partitions.
// MirrorNames empty = all. The tagged fields serve the failback lookup of
// LOG_ALIGNMENT (spec section 4): ClusterID (tag 0) is the asking
// (destination) cluster's ID, and LastMirrorEpochLookups (tag 1) asks for the
// last mirror position this cluster recorded when it stopped mirroring the
// given topic IDs/partitions from that cluster; answers are in
// LookupResults.
type DescribeClusterMirrorsRequest struct {
	Versioned
	MirrorNames                 []string
	IncludeAuthorizedOperations bool
	ClusterID                   *string                        // tag 0
	LastMirrorEpochLookups      []DescribeClusterMirrorsLookup // tag 1
	// LeadersOnly (tag 2, kmirror's inter-broker form) asks a broker of this cluster for
	// the partitions it leads only (the others are left out of the answer): the broker a
	// client asked merges the answers of every broker.
	LeadersOnly bool
}

// DescribeClusterMirrorsLookup asks for the last mirror position of
// partitions of one topic.
type DescribeClusterMirrorsLookup struct {
	TopicID    [16]byte
	Partitions []int32
}

// Key returns the served key, 1099.
func (*DescribeClusterMirrorsRequest) Key() int16 { return ServedKey(protoDescribeClusterMirrors) }

// ResponseKind returns an empty DescribeClusterMirrorsResponse.
func (v *DescribeClusterMirrorsRequest) ResponseKind() kmsg.Response {
	r := NewDescribeClusterMirrorsResponse()
	r.Versioned = v.Versioned
	return r
}

// AppendTo appends the request body.
func (v *DescribeClusterMirrorsRequest) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.strs(v.MirrorNames)
	w.bool(v.IncludeAuthorizedOperations)
	var cid, lookups []byte
	if v.ClusterID != nil {
		cid = field(func(w *writer) { w.nstr(v.ClusterID) })
	}
	if v.LastMirrorEpochLookups != nil {
		lookups = field(func(w *writer) {
			writeArray(w, v.LastMirrorEpochLookups, func(w *writer, l *DescribeClusterMirrorsLookup) {
				w.uuid(l.TopicID)
				w.i32s(l.Partitions)
				w.noTags()
			})
		})
	}
	var leaders []byte
	if v.LeadersOnly {
		leaders = field(func(w *writer) { w.bool(true) })
	}
	w.tags(cid, lookups, leaders)
	return w.b
}

// ReadFrom decodes the request body.
func (v *DescribeClusterMirrorsRequest) ReadFrom(src []byte) error {
	*v = DescribeClusterMirrorsRequest{Versioned: v.Versioned}
	r := newReader(src)
	v.MirrorNames = r.strs()
	v.IncludeAuthorizedOperations = r.bool()
	r.tags(func(tag uint32, f *reader) {
		switch tag {
		case 0:
			v.ClusterID = f.nstr()
		case 1:
			v.LastMirrorEpochLookups = nonNil(readArray(f, func(r *reader, l *DescribeClusterMirrorsLookup) {
				l.TopicID = r.uuid()
				l.Partitions = r.i32s()
				r.skipTags()
			}))
		case 2:
			v.LeadersOnly = f.bool()
		}
	})
	return r.Complete()
}

// DescribeClusterMirrorsResponse answers DescribeClusterMirrors.
// MaxRetryAttempts (tag 0, kmirror's addition) is the broker's
// mirror.failed.retry.max.attempts, -1 when not reported (then the CLI
// assumes DefaultMaxRetryAttempts).
type DescribeClusterMirrorsResponse struct {
	Versioned
	ThrottleTimeMs   int32
	ErrorCode        int16
	ErrorMessage     *string
	Mirrors          []DescribeClusterMirrorsResponseMirror
	LookupResults    []DescribeClusterMirrorsLookupResult
	MaxRetryAttempts int32 // tag 0, default -1
}

// NewDescribeClusterMirrorsResponse returns a response with MaxRetryAttempts -1.
func NewDescribeClusterMirrorsResponse() *DescribeClusterMirrorsResponse {
	return &DescribeClusterMirrorsResponse{MaxRetryAttempts: -1}
}

// DescribeClusterMirrorsResponseMirror is one mirror. ErrorCode is e.g.
// UNKNOWN_CLUSTER_MIRROR or CLUSTER_MIRROR_AUTHORIZATION_FAILED;
// ErrorMessage (tag 0, kmirror's addition) explains it. SyncTasks (tag 1,
// kmirror's addition) reports the periodic metadata sync tasks of spec
// section 9 (omitted when empty).
type DescribeClusterMirrorsResponseMirror struct {
	ErrorCode       int16
	MirrorName      string
	SourceBootstrap string
	SourceClusterID string
	Topics          []DescribeClusterMirrorsResponseTopic
	ErrorMessage    *string                          // tag 0
	SyncTasks       []DescribeClusterMirrorsSyncTask // tag 1
}

// DescribeClusterMirrorsSyncTask is the status of one periodic metadata sync
// task of a mirror (spec sections 9 and 13), e.g. "group-offsets":
// LastSuccessMs is the time (Unix ms) of the last successful run, -1 for
// none; LastErrorMs and LastError the time (Unix ms, -1 for none) and
// message of the last failed run; ErrorCount counts failed runs since the
// broker started.
type DescribeClusterMirrorsSyncTask struct {
	Task          string
	LastSuccessMs int64
	LastErrorMs   int64
	LastError     *string
	ErrorCount    int64
}

// DescribeClusterMirrorsResponseTopic is one mirror topic. TopicID (tag 0,
// kmirror's addition) is omitted when zero.
type DescribeClusterMirrorsResponseTopic struct {
	TopicName  string
	Partitions []DescribeClusterMirrorsResponsePartition
	TopicID    [16]byte // tag 0
}

// DescribeClusterMirrorsResponsePartition is one mirror partition. Offsets
// are -1 when unknown; Lag = source HW − destination LEO in records, -1 when
// unknown. RetryAttempt is -1 (RetryAttemptNonRetryable) for a non-retryable
// FAILED partition. LastMirrorEpoch/LastMirrorOffset are the last mirror
// position (spec section 5), -1 when none.
//
// Tagged (kmirror's additions): TruncatedOffset (tag 0, -1 = no report) and
// TruncatedRecords (tag 1) are the failback truncation report (spec section
// 15); SkippedOffsets (tag 2) counts offsets skipped because the source log
// start passed the mirror's position (spec section 16).
type DescribeClusterMirrorsResponsePartition struct {
	PartitionIndex    int32
	SourceOffset      int64
	DestinationOffset int64
	Lag               int64
	State             State
	RetryAttempt      int32
	ErrorMessage      *string
	LastMirrorEpoch   int32
	LastMirrorOffset  int64
	TruncatedOffset   int64 // tag 0, default -1
	TruncatedRecords  int64 // tag 1, default 0
	SkippedOffsets    int64 // tag 2, default 0
}

// NewDescribeClusterMirrorsResponsePartition returns a partition with its
// defaults: offsets, Lag, LastMirrorEpoch/Offset and TruncatedOffset -1,
// State UNKNOWN.
func NewDescribeClusterMirrorsResponsePartition(partition int32) DescribeClusterMirrorsResponsePartition {
	return DescribeClusterMirrorsResponsePartition{
		PartitionIndex:    partition,
		SourceOffset:      -1,
		DestinationOffset: -1,
		Lag:               -1,
		State:             StateUnknown,
		LastMirrorEpoch:   -1,
		LastMirrorOffset:  -1,
		TruncatedOffset:   -1,
	}
}

// DescribeClusterMirrorsLookupResult answers one LastMirrorEpochLookups entry.
type DescribeClusterMirrorsLookupResult struct {
	TopicID    [16]byte
	Partitions []DescribeClusterMirrorsLookupPartition
}

// DescribeClusterMirrorsLookupPartition is the recorded last mirror position
// of one partition; -1/-1 when none was recorded.
type DescribeClusterMirrorsLookupPartition struct {
	PartitionIndex   int32
	LastMirrorEpoch  int32
	LastMirrorOffset int64
}

// Key returns the served key, 1099.
func (*DescribeClusterMirrorsResponse) Key() int16 { return ServedKey(protoDescribeClusterMirrors) }

// RequestKind returns an empty DescribeClusterMirrorsRequest.
func (v *DescribeClusterMirrorsResponse) RequestKind() kmsg.Request {
	return &DescribeClusterMirrorsRequest{Versioned: v.Versioned}
}

// AppendTo appends the response body.
func (v *DescribeClusterMirrorsResponse) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.i32(v.ThrottleTimeMs)
	w.i16(v.ErrorCode)
	w.nstr(v.ErrorMessage)
	writeArray(w, v.Mirrors, writeDescribeMirror)
	writeArray(w, v.LookupResults, func(w *writer, l *DescribeClusterMirrorsLookupResult) {
		w.uuid(l.TopicID)
		writeArray(w, l.Partitions, func(w *writer, p *DescribeClusterMirrorsLookupPartition) {
			w.i32(p.PartitionIndex)
			w.i32(p.LastMirrorEpoch)
			w.i64(p.LastMirrorOffset)
			w.noTags()
		})
		w.noTags()
	})
	var maxRetry []byte
	if v.MaxRetryAttempts != -1 {
		maxRetry = field(func(w *writer) { w.i32(v.MaxRetryAttempts) })
	}
	w.tags(maxRetry)
	return w.b
}

func writeDescribeMirror(w *writer, m *DescribeClusterMirrorsResponseMirror) {
	w.i16(m.ErrorCode)
	w.str(m.MirrorName)
	w.str(m.SourceBootstrap)
	w.str(m.SourceClusterID)
	writeArray(w, m.Topics, func(w *writer, t *DescribeClusterMirrorsResponseTopic) {
		w.str(t.TopicName)
		writeArray(w, t.Partitions, writeDescribePartition)
		var id []byte
		if t.TopicID != ([16]byte{}) {
			id = field(func(w *writer) { w.uuid(t.TopicID) })
		}
		w.tags(id)
	})
	var msg, tasks []byte
	if m.ErrorMessage != nil {
		msg = field(func(w *writer) { w.nstr(m.ErrorMessage) })
	}
	if len(m.SyncTasks) > 0 {
		tasks = field(func(w *writer) {
			writeArray(w, m.SyncTasks, func(w *writer, t *DescribeClusterMirrorsSyncTask) {
				w.str(t.Task)
				w.i64(t.LastSuccessMs)
				w.i64(t.LastErrorMs)
				w.nstr(t.LastError)
				w.i64(t.ErrorCount)
				w.noTags()
			})
		})
	}
	w.tags(msg, tasks)
}

func writeDescribePartition(w *writer, p *DescribeClusterMirrorsResponsePartition) {
	w.i32(p.PartitionIndex)
	w.i64(p.SourceOffset)
	w.i64(p.DestinationOffset)
	w.i64(p.Lag)
	w.i8(int8(p.State))
	w.i32(p.RetryAttempt)
	w.nstr(p.ErrorMessage)
	w.i32(p.LastMirrorEpoch)
	w.i64(p.LastMirrorOffset)
	var to, recs, skipped []byte
	if p.TruncatedOffset != -1 {
		to = field(func(w *writer) { w.i64(p.TruncatedOffset) })
	}
	if p.TruncatedRecords != 0 {
		recs = field(func(w *writer) { w.i64(p.TruncatedRecords) })
	}
	if p.SkippedOffsets != 0 {
		skipped = field(func(w *writer) { w.i64(p.SkippedOffsets) })
	}
	w.tags(to, recs, skipped)
}

// ReadFrom decodes the response body.
func (v *DescribeClusterMirrorsResponse) ReadFrom(src []byte) error {
	*v = DescribeClusterMirrorsResponse{Versioned: v.Versioned, MaxRetryAttempts: -1}
	r := newReader(src)
	v.ThrottleTimeMs = r.i32()
	v.ErrorCode = r.i16()
	v.ErrorMessage = r.nstr()
	v.Mirrors = readArray(r, readDescribeMirror)
	v.LookupResults = readArray(r, func(r *reader, l *DescribeClusterMirrorsLookupResult) {
		l.TopicID = r.uuid()
		l.Partitions = readArray(r, func(r *reader, p *DescribeClusterMirrorsLookupPartition) {
			p.PartitionIndex = r.i32()
			p.LastMirrorEpoch = r.i32()
			p.LastMirrorOffset = r.i64()
			r.skipTags()
		})
		r.skipTags()
	})
	r.tags(func(tag uint32, f *reader) {
		if tag == 0 {
			v.MaxRetryAttempts = f.i32()
		}
	})
	return r.Complete()
}

func readDescribeMirror(r *reader, m *DescribeClusterMirrorsResponseMirror) {
	m.ErrorCode = r.i16()
	m.MirrorName = r.str()
	m.SourceBootstrap = r.str()
	m.SourceClusterID = r.str()
	m.Topics = readArray(r, func(r *reader, t *DescribeClusterMirrorsResponseTopic) {
		t.TopicName = r.str()
		t.Partitions = readArray(r, readDescribePartition)
		r.tags(func(tag uint32, f *reader) {
			if tag == 0 {
				t.TopicID = f.uuid()
			}
		})
	})
	r.tags(func(tag uint32, f *reader) {
		switch tag {
		case 0:
			m.ErrorMessage = f.nstr()
		case 1:
			m.SyncTasks = readArray(f, func(r *reader, t *DescribeClusterMirrorsSyncTask) {
				t.Task = r.str()
				t.LastSuccessMs = r.i64()
				t.LastErrorMs = r.i64()
				t.LastError = r.nstr()
				t.ErrorCount = r.i64()
				r.skipTags()
			})
		}
	})
}

func readDescribePartition(r *reader, p *DescribeClusterMirrorsResponsePartition) {
	p.PartitionIndex = r.i32()
	p.SourceOffset = r.i64()
	p.DestinationOffset = r.i64()
	p.Lag = r.i64()
	p.State = State(r.i8())
	p.RetryAttempt = r.i32()
	p.ErrorMessage = r.nstr()
	p.LastMirrorEpoch = r.i32()
	p.LastMirrorOffset = r.i64()
	p.TruncatedOffset = -1
	r.tags(func(tag uint32, f *reader) {
		switch tag {
		case 0:
			p.TruncatedOffset = f.i64()
		case 1:
			p.TruncatedRecords = f.i64()
		case 2:
			p.SkippedOffsets = f.i64()
		}
	})
}
