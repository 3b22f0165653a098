package mirrorproto

import "github.com/twmb/franz-go/pkg/kmsg"

// This file holds the admin RPCs that change mirrors and mirror topics
// (spec section 10): CreateClusterMirror, StartMirrorTopics,
// StopMirrorTopics, PauseMirrorTopics, ResumeMirrorTopics,
// DeleteClusterMirror and RecoverMirrorTopics.

// SkipStateValidation is the StateValidationOffset that skips the optimistic
// concurrency check (spec section 10).
const SkipStateValidation int64 = -1

// TopicName names one topic in a Stop/Pause/Resume/Recover request.
type TopicName struct {
	TopicName string
}

func writeTopicNames(w *writer, v []TopicName) {
	writeArray(w, v, func(w *writer, t *TopicName) { w.str(t.TopicName); w.noTags() })
}

func readTopicNames(r *reader) []TopicName {
	return readArray(r, func(r *reader, t *TopicName) { t.TopicName = r.str(); r.skipTags() })
}

// TopicResult is the per-topic result of Start, Stop, Pause and Resume.
// ErrorCode is a Kafka or mirror error code (e.g. TOPIC_ALREADY_IN_CLUSTER_MIRROR,
// UNKNOWN_TOPIC_OR_PARTITION), with an ErrorMessage when non-zero.
type TopicResult struct {
	Name         string
	ErrorCode    int16
	ErrorMessage *string
}

func writeTopicResults(w *writer, v []TopicResult) {
	writeArray(w, v, func(w *writer, t *TopicResult) {
		w.str(t.Name)
		w.i16(t.ErrorCode)
		w.nstr(t.ErrorMessage)
		w.noTags()
	})
}

func readTopicResults(r *reader) []TopicResult {
	return readArray(r, func(r *reader, t *TopicResult) {
		t.Name = r.str()
		t.ErrorCode = r.i16()
		t.ErrorMessage = r.nstr()
		r.skipTags()
	})
}

// --- CreateClusterMirror (prototype key 94) ---

// CreateClusterMirrorRequest creates a named cluster mirror. Config holds the
// mirror-level configs (spec section 11); bootstrap.servers is required and
// the source cluster ID is resolved if source.cluster.id is absent.
// Errors: CLUSTER_MIRROR_ALREADY_EXISTS, INVALID_CONFIG, INVALID_REQUEST.
type CreateClusterMirrorRequest struct {
	Versioned
	MirrorName string
	Config     []CreateClusterMirrorRequestConfig
}

// CreateClusterMirrorRequestConfig is one mirror config entry.
type CreateClusterMirrorRequestConfig struct {
	Name  string
	Value string
}

// Key returns the served key, 1094.
func (*CreateClusterMirrorRequest) Key() int16 { return ServedKey(protoCreateClusterMirror) }

// ResponseKind returns an empty CreateClusterMirrorResponse.
func (v *CreateClusterMirrorRequest) ResponseKind() kmsg.Response {
	return &CreateClusterMirrorResponse{Versioned: v.Versioned}
}

// AppendTo appends the request body.
func (v *CreateClusterMirrorRequest) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.str(v.MirrorName)
	writeArray(w, v.Config, func(w *writer, c *CreateClusterMirrorRequestConfig) {
		w.str(c.Name)
		w.str(c.Value)
		w.noTags()
	})
	w.noTags()
	return w.b
}

// ReadFrom decodes the request body.
func (v *CreateClusterMirrorRequest) ReadFrom(src []byte) error {
	*v = CreateClusterMirrorRequest{Versioned: v.Versioned}
	r := newReader(src)
	v.MirrorName = r.str()
	v.Config = readArray(r, func(r *reader, c *CreateClusterMirrorRequestConfig) {
		c.Name = r.str()
		c.Value = r.str()
		r.skipTags()
	})
	r.skipTags()
	return r.Complete()
}

// CreateClusterMirrorResponse answers CreateClusterMirror.
type CreateClusterMirrorResponse struct {
	Versioned
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
}

// Key returns the served key, 1094.
func (*CreateClusterMirrorResponse) Key() int16 { return ServedKey(protoCreateClusterMirror) }

// RequestKind returns an empty CreateClusterMirrorRequest.
func (v *CreateClusterMirrorResponse) RequestKind() kmsg.Request {
	return &CreateClusterMirrorRequest{Versioned: v.Versioned}
}

// AppendTo appends the response body.
func (v *CreateClusterMirrorResponse) AppendTo(dst []byte) []byte {
	return appendErrorOnly(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
}

// ReadFrom decodes the response body.
func (v *CreateClusterMirrorResponse) ReadFrom(src []byte) error {
	*v = CreateClusterMirrorResponse{Versioned: v.Versioned}
	return readErrorOnly(src, &v.ThrottleTimeMs, &v.ErrorCode, &v.ErrorMessage)
}

func appendErrorOnly(dst []byte, throttle int32, code int16, msg *string) []byte {
	w := &writer{dst}
	w.i32(throttle)
	w.i16(code)
	w.nstr(msg)
	w.noTags()
	return w.b
}

func readErrorOnly(src []byte, throttle *int32, code *int16, msg **string) error {
	r := newReader(src)
	*throttle = r.i32()
	*code = r.i16()
	*msg = r.nstr()
	r.skipTags()
	return r.Complete()
}

// --- StartMirrorTopics (prototype key 95) ---

// StartMirrorTopicsRequest starts mirroring topics of a mirror. Named topics
// are in Topics; IncludePatterns/ExcludePatterns (tagged 0 and 1) are
// regexes the broker resolves against the source topic list (spec section 8).
// TopicID and NumPartitions may be zero: the broker fills them from the
// source. StateValidationOffset (tagged 2) is SkipStateValidation (-1) by
// default. Errors per topic: TOPIC_ALREADY_IN_CLUSTER_MIRROR,
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_CLUSTER_MIRROR_STATES; top level:
// UNKNOWN_CLUSTER_MIRROR.
type StartMirrorTopicsRequest struct {
	Versioned
	MirrorName            string
	Topics                []StartMirrorTopicsRequestTopic
	IncludePatterns       []string // tag 0
	ExcludePatterns       []string // tag 1
	StateValidationOffset int64    // tag 2, default -1
}

// StartMirrorTopicsRequestTopic names one topic to start.
type StartMirrorTopicsRequestTopic struct {
	TopicID       [16]byte
	TopicName     string
	NumPartitions int32
}

// NewStartMirrorTopicsRequest returns a request with StateValidationOffset -1.
func NewStartMirrorTopicsRequest() *StartMirrorTopicsRequest {
	return &StartMirrorTopicsRequest{StateValidationOffset: SkipStateValidation}
}

// Key returns the served key, 1095.
func (*StartMirrorTopicsRequest) Key() int16 { return ServedKey(protoStartMirrorTopics) }

// ResponseKind returns an empty StartMirrorTopicsResponse.
func (v *StartMirrorTopicsRequest) ResponseKind() kmsg.Response {
	return &StartMirrorTopicsResponse{Versioned: v.Versioned}
}

// AppendTo appends the request body.
func (v *StartMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.str(v.MirrorName)
	writeArray(w, v.Topics, func(w *writer, t *StartMirrorTopicsRequestTopic) {
		w.uuid(t.TopicID)
		w.str(t.TopicName)
		w.i32(t.NumPartitions)
		w.noTags()
	})
	var inc, exc, svo []byte
	if v.IncludePatterns != nil {
		inc = field(func(w *writer) { w.strs(v.IncludePatterns) })
	}
	if v.ExcludePatterns != nil {
		exc = field(func(w *writer) { w.strs(v.ExcludePatterns) })
	}
	if v.StateValidationOffset != SkipStateValidation {
		svo = field(func(w *writer) { w.i64(v.StateValidationOffset) })
	}
	w.tags(inc, exc, svo)
	return w.b
}

// ReadFrom decodes the request body.
func (v *StartMirrorTopicsRequest) ReadFrom(src []byte) error {
	*v = StartMirrorTopicsRequest{Versioned: v.Versioned, StateValidationOffset: SkipStateValidation}
	r := newReader(src)
	v.MirrorName = r.str()
	v.Topics = readArray(r, func(r *reader, t *StartMirrorTopicsRequestTopic) {
		t.TopicID = r.uuid()
		t.TopicName = r.str()
		t.NumPartitions = r.i32()
		r.skipTags()
	})
	r.tags(func(tag uint32, f *reader) {
		switch tag {
		case 0:
			v.IncludePatterns = nonNil(f.strs())
		case 1:
			v.ExcludePatterns = nonNil(f.strs())
		case 2:
			v.StateValidationOffset = f.i64()
		}
	})
	return r.Complete()
}

// nonNil turns a decoded empty tagged array into an empty, non-nil slice, so
// that "present but empty" survives a round trip.
func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// StartMirrorTopicsResponse answers StartMirrorTopics with a result per topic
// started (patterns expanded by the broker).
type StartMirrorTopicsResponse struct {
	Versioned
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []TopicResult
}

// Key returns the served key, 1095.
func (*StartMirrorTopicsResponse) Key() int16 { return ServedKey(protoStartMirrorTopics) }

// RequestKind returns an empty StartMirrorTopicsRequest.
func (v *StartMirrorTopicsResponse) RequestKind() kmsg.Request {
	r := NewStartMirrorTopicsRequest()
	r.Versioned = v.Versioned
	return r
}

// AppendTo appends the response body.
func (v *StartMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return appendTopicsResponse(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.Topics)
}

// ReadFrom decodes the response body.
func (v *StartMirrorTopicsResponse) ReadFrom(src []byte) error {
	*v = StartMirrorTopicsResponse{Versioned: v.Versioned}
	return readTopicsResponse(src, &v.ThrottleTimeMs, &v.ErrorCode, &v.ErrorMessage, &v.Topics)
}

func appendTopicsResponse(dst []byte, throttle int32, code int16, msg *string, topics []TopicResult) []byte {
	w := &writer{dst}
	w.i32(throttle)
	w.i16(code)
	w.nstr(msg)
	writeTopicResults(w, topics)
	w.noTags()
	return w.b
}

func readTopicsResponse(src []byte, throttle *int32, code *int16, msg **string, topics *[]TopicResult) error {
	r := newReader(src)
	*throttle = r.i32()
	*code = r.i16()
	*msg = r.nstr()
	*topics = readTopicResults(r)
	r.skipTags()
	return r.Complete()
}

// --- StopMirrorTopics (prototype key 96) ---

// StopMirrorTopicsRequest runs failover (spec section 5) for named topics
// and for the mirror's topics matching Patterns (tag 0, regexes).
// StateValidationOffset (tag 1) is -1 by default. Errors per topic:
// TOPIC_NOT_IN_CLUSTER_MIRROR, MIRROR_TOPIC_BEING_STOPPED; top level:
// UNKNOWN_CLUSTER_MIRROR.
type StopMirrorTopicsRequest struct {
	Versioned
	MirrorName            string
	Topics                []TopicName
	Patterns              []string // tag 0
	StateValidationOffset int64    // tag 1, default -1
}

// NewStopMirrorTopicsRequest returns a request with StateValidationOffset -1.
func NewStopMirrorTopicsRequest() *StopMirrorTopicsRequest {
	return &StopMirrorTopicsRequest{StateValidationOffset: SkipStateValidation}
}

// Key returns the served key, 1096.
func (*StopMirrorTopicsRequest) Key() int16 { return ServedKey(protoStopMirrorTopics) }

// ResponseKind returns an empty StopMirrorTopicsResponse.
func (v *StopMirrorTopicsRequest) ResponseKind() kmsg.Response {
	return &StopMirrorTopicsResponse{Versioned: v.Versioned}
}

// AppendTo appends the request body.
func (v *StopMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.str(v.MirrorName)
	writeTopicNames(w, v.Topics)
	var pat, svo []byte
	if v.Patterns != nil {
		pat = field(func(w *writer) { w.strs(v.Patterns) })
	}
	if v.StateValidationOffset != SkipStateValidation {
		svo = field(func(w *writer) { w.i64(v.StateValidationOffset) })
	}
	w.tags(pat, svo)
	return w.b
}

// ReadFrom decodes the request body.
func (v *StopMirrorTopicsRequest) ReadFrom(src []byte) error {
	*v = StopMirrorTopicsRequest{Versioned: v.Versioned, StateValidationOffset: SkipStateValidation}
	r := newReader(src)
	v.MirrorName = r.str()
	v.Topics = readTopicNames(r)
	r.tags(func(tag uint32, f *reader) {
		switch tag {
		case 0:
			v.Patterns = nonNil(f.strs())
		case 1:
			v.StateValidationOffset = f.i64()
		}
	})
	return r.Complete()
}

// StopMirrorTopicsResponse answers StopMirrorTopics, one result per topic.
type StopMirrorTopicsResponse struct {
	Versioned
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []TopicResult
}

// Key returns the served key, 1096.
func (*StopMirrorTopicsResponse) Key() int16 { return ServedKey(protoStopMirrorTopics) }

// RequestKind returns an empty StopMirrorTopicsRequest.
func (v *StopMirrorTopicsResponse) RequestKind() kmsg.Request {
	r := NewStopMirrorTopicsRequest()
	r.Versioned = v.Versioned
	return r
}

// AppendTo appends the response body.
func (v *StopMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return appendTopicsResponse(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.Topics)
}

// ReadFrom decodes the response body.
func (v *StopMirrorTopicsResponse) ReadFrom(src []byte) error {
	*v = StopMirrorTopicsResponse{Versioned: v.Versioned}
	return readTopicsResponse(src, &v.ThrottleTimeMs, &v.ErrorCode, &v.ErrorMessage, &v.Topics)
}

// --- PauseMirrorTopics (prototype key 102) and ResumeMirrorTopics (103) ---

// PauseMirrorTopicsRequest pauses MIRRORING topics (spec section 4).
// StateValidationOffset is -1 to skip the check. Errors per topic:
// MIRROR_TOPIC_ALREADY_PAUSED, TOPIC_NOT_IN_CLUSTER_MIRROR,
// MIRROR_TOPIC_BEING_STOPPED, INVALID_CLUSTER_MIRROR_STATES.
type PauseMirrorTopicsRequest struct {
	Versioned
	MirrorName            string
	Topics                []TopicName
	StateValidationOffset int64
}

// NewPauseMirrorTopicsRequest returns a request with StateValidationOffset -1.
func NewPauseMirrorTopicsRequest() *PauseMirrorTopicsRequest {
	return &PauseMirrorTopicsRequest{StateValidationOffset: SkipStateValidation}
}

// Key returns the served key, 1102.
func (*PauseMirrorTopicsRequest) Key() int16 { return ServedKey(protoPauseMirrorTopics) }

// ResponseKind returns an empty PauseMirrorTopicsResponse.
func (v *PauseMirrorTopicsRequest) ResponseKind() kmsg.Response {
	return &PauseMirrorTopicsResponse{Versioned: v.Versioned}
}

// AppendTo appends the request body.
func (v *PauseMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	return appendNamesRequest(dst, v.MirrorName, v.Topics, v.StateValidationOffset)
}

// ReadFrom decodes the request body.
func (v *PauseMirrorTopicsRequest) ReadFrom(src []byte) error {
	*v = PauseMirrorTopicsRequest{Versioned: v.Versioned}
	return readNamesRequest(src, &v.MirrorName, &v.Topics, &v.StateValidationOffset)
}

func appendNamesRequest(dst []byte, mirror string, topics []TopicName, svo int64) []byte {
	w := &writer{dst}
	w.str(mirror)
	writeTopicNames(w, topics)
	w.i64(svo)
	w.noTags()
	return w.b
}

func readNamesRequest(src []byte, mirror *string, topics *[]TopicName, svo *int64) error {
	r := newReader(src)
	*mirror = r.str()
	*topics = readTopicNames(r)
	*svo = r.i64()
	r.skipTags()
	return r.Complete()
}

// PauseMirrorTopicsResponse answers PauseMirrorTopics, one result per topic.
type PauseMirrorTopicsResponse struct {
	Versioned
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []TopicResult
}

// Key returns the served key, 1102.
func (*PauseMirrorTopicsResponse) Key() int16 { return ServedKey(protoPauseMirrorTopics) }

// RequestKind returns an empty PauseMirrorTopicsRequest.
func (v *PauseMirrorTopicsResponse) RequestKind() kmsg.Request {
	r := NewPauseMirrorTopicsRequest()
	r.Versioned = v.Versioned
	return r
}

// AppendTo appends the response body.
func (v *PauseMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return appendTopicsResponse(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.Topics)
}

// ReadFrom decodes the response body.
func (v *PauseMirrorTopicsResponse) ReadFrom(src []byte) error {
	*v = PauseMirrorTopicsResponse{Versioned: v.Versioned}
	return readTopicsResponse(src, &v.ThrottleTimeMs, &v.ErrorCode, &v.ErrorMessage, &v.Topics)
}

// ResumeMirrorTopicsRequest resumes PAUSED topics from their local LEO.
// StateValidationOffset is -1 to skip the check. Errors per topic:
// MIRROR_TOPIC_NOT_PAUSED, TOPIC_NOT_IN_CLUSTER_MIRROR, MIRROR_TOPIC_BEING_STOPPED.
type ResumeMirrorTopicsRequest struct {
	Versioned
	MirrorName            string
	Topics                []TopicName
	StateValidationOffset int64
}

// NewResumeMirrorTopicsRequest returns a request with StateValidationOffset -1.
func NewResumeMirrorTopicsRequest() *ResumeMirrorTopicsRequest {
	return &ResumeMirrorTopicsRequest{StateValidationOffset: SkipStateValidation}
}

// Key returns the served key, 1103.
func (*ResumeMirrorTopicsRequest) Key() int16 { return ServedKey(protoResumeMirrorTopics) }

// ResponseKind returns an empty ResumeMirrorTopicsResponse.
func (v *ResumeMirrorTopicsRequest) ResponseKind() kmsg.Response {
	return &ResumeMirrorTopicsResponse{Versioned: v.Versioned}
}

// AppendTo appends the request body.
func (v *ResumeMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	return appendNamesRequest(dst, v.MirrorName, v.Topics, v.StateValidationOffset)
}

// ReadFrom decodes the request body.
func (v *ResumeMirrorTopicsRequest) ReadFrom(src []byte) error {
	*v = ResumeMirrorTopicsRequest{Versioned: v.Versioned}
	return readNamesRequest(src, &v.MirrorName, &v.Topics, &v.StateValidationOffset)
}

// ResumeMirrorTopicsResponse answers ResumeMirrorTopics, one result per topic.
type ResumeMirrorTopicsResponse struct {
	Versioned
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []TopicResult
}

// Key returns the served key, 1103.
func (*ResumeMirrorTopicsResponse) Key() int16 { return ServedKey(protoResumeMirrorTopics) }

// RequestKind returns an empty ResumeMirrorTopicsRequest.
func (v *ResumeMirrorTopicsResponse) RequestKind() kmsg.Request {
	r := NewResumeMirrorTopicsRequest()
	r.Versioned = v.Versioned
	return r
}

// AppendTo appends the response body.
func (v *ResumeMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return appendTopicsResponse(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.Topics)
}

// ReadFrom decodes the response body.
func (v *ResumeMirrorTopicsResponse) ReadFrom(src []byte) error {
	*v = ResumeMirrorTopicsResponse{Versioned: v.Versioned}
	return readTopicsResponse(src, &v.ThrottleTimeMs, &v.ErrorCode, &v.ErrorMessage, &v.Topics)
}

// --- DeleteClusterMirror (prototype key 104) ---

// DeleteClusterMirrorRequest deletes a mirror whose topics are all STOPPED.
// Errors: UNKNOWN_CLUSTER_MIRROR, CLUSTER_MIRROR_NOT_EMPTY,
// INVALID_CLUSTER_MIRROR_STATES.
type DeleteClusterMirrorRequest struct {
	Versioned
	MirrorName            string
	StateValidationOffset int64
}

// NewDeleteClusterMirrorRequest returns a request with StateValidationOffset -1.
func NewDeleteClusterMirrorRequest() *DeleteClusterMirrorRequest {
	return &DeleteClusterMirrorRequest{StateValidationOffset: SkipStateValidation}
}

// Key returns the served key, 1104.
func (*DeleteClusterMirrorRequest) Key() int16 { return ServedKey(protoDeleteClusterMirror) }

// ResponseKind returns an empty DeleteClusterMirrorResponse.
func (v *DeleteClusterMirrorRequest) ResponseKind() kmsg.Response {
	return &DeleteClusterMirrorResponse{Versioned: v.Versioned}
}

// AppendTo appends the request body.
func (v *DeleteClusterMirrorRequest) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.str(v.MirrorName)
	w.i64(v.StateValidationOffset)
	w.noTags()
	return w.b
}

// ReadFrom decodes the request body.
func (v *DeleteClusterMirrorRequest) ReadFrom(src []byte) error {
	*v = DeleteClusterMirrorRequest{Versioned: v.Versioned}
	r := newReader(src)
	v.MirrorName = r.str()
	v.StateValidationOffset = r.i64()
	r.skipTags()
	return r.Complete()
}

// DeleteClusterMirrorResponse answers DeleteClusterMirror.
type DeleteClusterMirrorResponse struct {
	Versioned
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
}

// Key returns the served key, 1104.
func (*DeleteClusterMirrorResponse) Key() int16 { return ServedKey(protoDeleteClusterMirror) }

// RequestKind returns an empty DeleteClusterMirrorRequest.
func (v *DeleteClusterMirrorResponse) RequestKind() kmsg.Request {
	r := NewDeleteClusterMirrorRequest()
	r.Versioned = v.Versioned
	return r
}

// AppendTo appends the response body.
func (v *DeleteClusterMirrorResponse) AppendTo(dst []byte) []byte {
	return appendErrorOnly(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
}

// ReadFrom decodes the response body.
func (v *DeleteClusterMirrorResponse) ReadFrom(src []byte) error {
	*v = DeleteClusterMirrorResponse{Versioned: v.Versioned}
	return readErrorOnly(src, &v.ThrottleTimeMs, &v.ErrorCode, &v.ErrorMessage)
}

// --- RecoverMirrorTopics (prototype key 106) ---

// RecoverMirrorTopicsRequest sends the FAILED partitions of the named topics
// back to LOG_ALIGNMENT (spec section 4, `--recover`). Errors per topic:
// TOPIC_NOT_IN_CLUSTER_MIRROR; top level: UNKNOWN_CLUSTER_MIRROR.
type RecoverMirrorTopicsRequest struct {
	Versioned
	MirrorName string
	Topics     []TopicName
	// LeadersOnly (tag 0, kmirror's inter-broker form) recovers only the partitions the
	// receiving broker leads: the broker a client asked forwards the request so to every
	// other broker.
	LeadersOnly bool
}

// Key returns the served key, 1106.
func (*RecoverMirrorTopicsRequest) Key() int16 { return ServedKey(protoRecoverMirrorTopics) }

// ResponseKind returns an empty RecoverMirrorTopicsResponse.
func (v *RecoverMirrorTopicsRequest) ResponseKind() kmsg.Response {
	return &RecoverMirrorTopicsResponse{Versioned: v.Versioned}
}

// AppendTo appends the request body.
func (v *RecoverMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.str(v.MirrorName)
	writeTopicNames(w, v.Topics)
	var leaders []byte
	if v.LeadersOnly {
		leaders = field(func(w *writer) { w.bool(true) })
	}
	w.tags(leaders)
	return w.b
}

// ReadFrom decodes the request body.
func (v *RecoverMirrorTopicsRequest) ReadFrom(src []byte) error {
	*v = RecoverMirrorTopicsRequest{Versioned: v.Versioned}
	r := newReader(src)
	v.MirrorName = r.str()
	v.Topics = readTopicNames(r)
	r.tags(func(tag uint32, f *reader) {
		if tag == 0 {
			v.LeadersOnly = f.bool()
		}
	})
	return r.Complete()
}

// RecoverMirrorTopicsResponse answers RecoverMirrorTopics: per topic, the
// partitions sent from FAILED back to LOG_ALIGNMENT.
type RecoverMirrorTopicsResponse struct {
	Versioned
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []RecoverMirrorTopicsResponseTopic
}

// RecoverMirrorTopicsResponseTopic is one topic's recovery result.
type RecoverMirrorTopicsResponseTopic struct {
	Name         string
	ErrorCode    int16
	ErrorMessage *string
	Partitions   []int32 // partitions recovered
}

// Key returns the served key, 1106.
func (*RecoverMirrorTopicsResponse) Key() int16 { return ServedKey(protoRecoverMirrorTopics) }

// RequestKind returns an empty RecoverMirrorTopicsRequest.
func (v *RecoverMirrorTopicsResponse) RequestKind() kmsg.Request {
	return &RecoverMirrorTopicsRequest{Versioned: v.Versioned}
}

// AppendTo appends the response body.
func (v *RecoverMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	w := &writer{dst}
	w.i32(v.ThrottleTimeMs)
	w.i16(v.ErrorCode)
	w.nstr(v.ErrorMessage)
	writeArray(w, v.Topics, func(w *writer, t *RecoverMirrorTopicsResponseTopic) {
		w.str(t.Name)
		w.i16(t.ErrorCode)
		w.nstr(t.ErrorMessage)
		w.i32s(t.Partitions)
		w.noTags()
	})
	w.noTags()
	return w.b
}

// ReadFrom decodes the response body.
func (v *RecoverMirrorTopicsResponse) ReadFrom(src []byte) error {
	*v = RecoverMirrorTopicsResponse{Versioned: v.Versioned}
	r := newReader(src)
	v.ThrottleTimeMs = r.i32()
	v.ErrorCode = r.i16()
	v.ErrorMessage = r.nstr()
	v.Topics = readArray(r, func(r *reader, t *RecoverMirrorTopicsResponseTopic) {
		t.Name = r.str()
		t.ErrorCode = r.i16()
		t.ErrorMessage = r.nstr()
		t.Partitions = r.i32s()
		r.skipTags()
	})
	r.skipTags()
	return r.Complete()
}
