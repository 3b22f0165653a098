package broker

// Fetch sessions (KIP-227), following Apache Kafka's FetchSession.scala (FetchManager,
// FetchSessionCache, CachedPartition and the Full/Incremental/Sessionless/SessionError
// fetch contexts):
//
//   - SessionEpoch −1 (FINAL_EPOCH): a sessionless full fetch; a non-zero SessionID
//     closes that session. The response carries SessionID 0.
//   - SessionEpoch 0 (INITIAL_EPOCH): a full fetch that asks for a new session; a
//     non-zero SessionID closes that session first. The response carries the new
//     session's ID, or 0 when the cache has no free slot and nothing is evictable.
//   - any other epoch: an incremental fetch of session SessionID. Unknown ID →
//     FETCH_SESSION_ID_NOT_FOUND; epoch other than the expected one →
//     INVALID_FETCH_SESSION_EPOCH; topic-ID use (v13+) differing from the session's →
//     FETCH_SESSION_TOPIC_ID_ERROR. Listed partitions are added or updated, forgotten
//     partitions removed, and the whole session is fetched; the response holds only
//     the partitions with records, a changed high watermark or log start offset, an
//     error or a diverging epoch. Partitions that returned records move to the end of
//     the session's order, so every partition gets its turn under MaxBytes.
//
// The cache holds max.incremental.fetch.session.cache.slots sessions (default 1000).
// When it is full, a new session evicts the least recently used one if that was idle
// for more than 120 s (Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS), else the
// smallest session older than 120 s that has no more partitions than the new one;
// otherwise no session is created. Replica fetchers fetch without a session, so every
// session is a consumer (unprivileged) session.

import (
	"math"
	"math/rand/v2"
	"sync"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// fetchSessionEvictionMs is Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS.
	fetchSessionEvictionMs = 120000
)

// cachedPartition is Kafka's CachedPartition: the last fetch parameters the client
// sent and the last high watermark and log start offset it was told.
type cachedPartition struct {
	key                kafka.TopicIDPartition
	topic              string
	topicID            [16]byte
	fetchOffset        int64
	maxBytes           int32
	currentLeaderEpoch int32
	lastFetchedEpoch   int32
	highWatermark      int64 // −1: not yet told, so the partition is always answered
	logStartOffset     int64
}

// fetchSession is one cached session.
type fetchSession struct {
	id           int32
	epoch        int32 // the epoch the next incremental request must carry
	usesTopicIDs bool
	parts        []*cachedPartition // fetch order
	creationMs   int64
	lastUsedMs   int64
}

// fetchSessionCache is Kafka's FetchSessionCache for consumer sessions.
type fetchSessionCache struct {
	mu         sync.Mutex
	maxSlots   int
	evictionMs int64
	sessions   map[int32]*fetchSession
}

func newFetchSessionCache(slots int) *fetchSessionCache {
	return &fetchSessionCache{maxSlots: slots, evictionMs: fetchSessionEvictionMs, sessions: map[int32]*fetchSession{}}
}

// fetchSessionSlots is max.incremental.fetch.session.cache.slots.
func (b *Broker) fetchSessionSlots() int {
	return int(b.cfg.Int32("max.incremental.fetch.session.cache.slots"))
}

// fetchContext is what newContext decided for one request: the request to execute
// (for an incremental fetch, the whole session) and how to shape the response.
type fetchContext struct {
	kind    int // fetchSessionless, fetchFull, fetchIncremental
	req     *kmsg.FetchRequest
	session *fetchSession
	errCode int16
}

const (
	fetchSessionless = iota
	fetchFull
	fetchIncremental
	fetchSessionError
)

func partKey(usesTopicIDs bool, topic string, id [16]byte, p int32) kafka.TopicIDPartition {
	if usesTopicIDs {
		return kafka.TopicIDPartition{TopicID: id, Partition: p}
	}
	return kafka.TopicIDPartition{Topic: topic, Partition: p}
}

// newContext is Kafka's FetchManager.newContext.
func (c *fetchSessionCache) newContext(req *kmsg.FetchRequest, nowMs int64) *fetchContext {
	if req.Version < 7 {
		return &fetchContext{kind: fetchSessionless, req: req}
	}
	usesTopicIDs := req.Version >= 13
	c.mu.Lock()
	defer c.mu.Unlock()
	switch req.SessionEpoch {
	case -1, 0:
		if req.SessionID != 0 {
			delete(c.sessions, req.SessionID)
		}
		if req.SessionEpoch == -1 {
			return &fetchContext{kind: fetchSessionless, req: req}
		}
		return &fetchContext{kind: fetchFull, req: req}
	}
	s := c.sessions[req.SessionID]
	switch {
	case s == nil:
		return &fetchContext{kind: fetchSessionError, errCode: kerr.FetchSessionIDNotFound.Code}
	case s.epoch != req.SessionEpoch:
		return &fetchContext{kind: fetchSessionError, errCode: kerr.InvalidFetchSessionEpoch.Code}
	case s.usesTopicIDs != usesTopicIDs:
		return &fetchContext{kind: fetchSessionError, errCode: kerr.FetchSessionTopicIDError.Code}
	}
	// Forget, then add or update (Kafka's FetchSession.update).
	forget := map[kafka.TopicIDPartition]bool{}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			forget[partKey(usesTopicIDs, ft.Topic, ft.TopicID, p)] = true
		}
	}
	if len(forget) > 0 {
		kept := s.parts[:0]
		for _, cp := range s.parts {
			if !forget[cp.key] {
				kept = append(kept, cp)
			}
		}
		s.parts = kept
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := partKey(usesTopicIDs, rt.Topic, rt.TopicID, rp.Partition)
			cp := s.find(k)
			if cp == nil {
				cp = &cachedPartition{key: k, topic: rt.Topic, topicID: rt.TopicID, highWatermark: -1, logStartOffset: -1}
				s.parts = append(s.parts, cp)
			}
			cp.fetchOffset, cp.maxBytes = rp.FetchOffset, rp.PartitionMaxBytes
			cp.currentLeaderEpoch, cp.lastFetchedEpoch = rp.CurrentLeaderEpoch, rp.LastFetchedEpoch
		}
	}
	s.epoch = nextFetchEpoch(s.epoch)
	s.lastUsedMs = nowMs
	return &fetchContext{kind: fetchIncremental, req: s.request(req), session: s}
}

// nextFetchEpoch is Kafka's FetchMetadata.nextEpoch: MaxInt32 wraps to 1.
func nextFetchEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

func (s *fetchSession) find(k kafka.TopicIDPartition) *cachedPartition {
	for _, cp := range s.parts {
		if cp.key == k {
			return cp
		}
	}
	return nil
}

// request builds the fetch of every partition of the session, in session order,
// with the request-level settings of the incoming request.
func (s *fetchSession) request(in *kmsg.FetchRequest) *kmsg.FetchRequest {
	r := *in
	r.Topics, r.ForgottenTopics = nil, nil
	for _, cp := range s.parts {
		if n := len(r.Topics); n == 0 || r.Topics[n-1].Topic != cp.topic || r.Topics[n-1].TopicID != cp.topicID {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = cp.topic, cp.topicID
			r.Topics = append(r.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = cp.key.Partition
		rp.FetchOffset, rp.PartitionMaxBytes = cp.fetchOffset, cp.maxBytes
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = cp.currentLeaderEpoch, cp.lastFetchedEpoch
		rp.LogStartOffset = -1
		rt := &r.Topics[len(r.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return &r
}

// finish shapes the response for the context: the session ID, and for incremental
// fetches only the partitions that must be answered (Kafka's
// CachedPartition.maybeUpdateResponseData). hasRecords tells whether a partition
// carries record batches (nil: non-empty RecordBatches).
func (c *fetchSessionCache) finish(fc *fetchContext, resp *kmsg.FetchResponse, nowMs int64, hasRecords func(*kmsg.FetchResponseTopic, *kmsg.FetchResponseTopicPartition) bool) *kmsg.FetchResponse {
	if hasRecords == nil {
		hasRecords = func(_ *kmsg.FetchResponseTopic, sp *kmsg.FetchResponseTopicPartition) bool {
			return len(sp.RecordBatches) > 0
		}
	}
	switch fc.kind {
	case fetchSessionless:
		resp.SessionID = 0
	case fetchFull:
		resp.SessionID = c.create(fc.req, resp, nowMs)
	case fetchIncremental:
		c.mu.Lock()
		defer c.mu.Unlock()
		s := fc.session
		resp.SessionID = s.id
		if c.sessions[s.id] != s {
			// Closed or evicted while the fetch waited: answer in full, as the
			// client's next incremental fetch gets FETCH_SESSION_ID_NOT_FOUND.
			return resp
		}
		var withRecords []*cachedPartition
		topics := resp.Topics[:0]
		for _, st := range resp.Topics {
			parts := st.Partitions[:0]
			for _, sp := range st.Partitions {
				cp := s.find(partKey(s.usesTopicIDs, st.Topic, st.TopicID, sp.Partition))
				records := hasRecords(&st, &sp)
				if cp == nil || cp.mustRespond(&sp, records) {
					parts = append(parts, sp)
					if cp != nil && records {
						withRecords = append(withRecords, cp)
					}
				}
			}
			if len(parts) > 0 {
				st.Partitions = parts
				topics = append(topics, st)
			}
		}
		resp.Topics = topics
		s.moveToEnd(withRecords)
	}
	return resp
}

// mustRespond is Kafka's CachedPartition.maybeUpdateResponseData with updates on.
// records tells whether sp carries record batches (in memory or as a file range).
func (cp *cachedPartition) mustRespond(sp *kmsg.FetchResponseTopicPartition, records bool) bool {
	must := records
	if cp.highWatermark != sp.HighWatermark {
		must = true
		cp.highWatermark = sp.HighWatermark
	}
	if cp.logStartOffset != sp.LogStartOffset {
		must = true
		cp.logStartOffset = sp.LogStartOffset
	}
	if sp.PreferredReadReplica >= 0 || sp.DivergingEpoch.Epoch >= 0 {
		must = true
	}
	if sp.ErrorCode != 0 {
		// Re-send the partition once the error goes away.
		cp.highWatermark = -1
		must = true
	}
	return must
}

// moveToEnd moves partitions that returned records to the end of the fetch order.
func (s *fetchSession) moveToEnd(moved []*cachedPartition) {
	if len(moved) == 0 {
		return
	}
	skip := make(map[*cachedPartition]bool, len(moved))
	for _, cp := range moved {
		skip[cp] = true
	}
	kept := make([]*cachedPartition, 0, len(s.parts))
	for _, cp := range s.parts {
		if !skip[cp] {
			kept = append(kept, cp)
		}
	}
	s.parts = append(kept, moved...)
}

// create is Kafka's FetchSessionCache.maybeCreateSession for a full fetch; it returns
// the new session ID, or 0 when the response has a top-level error or no slot is free.
func (c *fetchSessionCache) create(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, nowMs int64) int32 {
	if resp.ErrorCode != 0 {
		return 0
	}
	usesTopicIDs := req.Version >= 13
	s := &fetchSession{epoch: 1, usesTopicIDs: usesTopicIDs, creationMs: nowMs, lastUsedMs: nowMs}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := partKey(usesTopicIDs, rt.Topic, rt.TopicID, rp.Partition)
			if s.find(k) != nil {
				continue
			}
			s.parts = append(s.parts, &cachedPartition{
				key: k, topic: rt.Topic, topicID: rt.TopicID,
				fetchOffset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes,
				currentLeaderEpoch: rp.CurrentLeaderEpoch, lastFetchedEpoch: rp.LastFetchedEpoch,
				highWatermark: -1, logStartOffset: -1,
			})
		}
	}
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			if cp := s.find(partKey(usesTopicIDs, st.Topic, st.TopicID, sp.Partition)); cp != nil && sp.ErrorCode == 0 {
				cp.highWatermark, cp.logStartOffset = sp.HighWatermark, sp.LogStartOffset
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.maxSlots && !c.evictFor(len(s.parts), nowMs) {
		return 0
	}
	for {
		s.id = rand.Int32N(math.MaxInt32) + 1
		if c.sessions[s.id] == nil {
			break
		}
	}
	c.sessions[s.id] = s
	return s.id
}

// evictFor is Kafka's FetchSessionCache.tryEvict for an unprivileged session of size
// partitions: the least recently used session if it is stale, else the smallest
// session created more than evictionMs ago whose size does not exceed size.
func (c *fetchSessionCache) evictFor(size int, nowMs int64) bool {
	if len(c.sessions) == 0 {
		return false
	}
	var lru, smallest *fetchSession
	for _, s := range c.sessions {
		if lru == nil || s.lastUsedMs < lru.lastUsedMs || (s.lastUsedMs == lru.lastUsedMs && s.id < lru.id) {
			lru = s
		}
		if nowMs-s.creationMs > c.evictionMs {
			if smallest == nil || len(s.parts) < len(smallest.parts) || (len(s.parts) == len(smallest.parts) && s.id < smallest.id) {
				smallest = s
			}
		}
	}
	if nowMs-lru.lastUsedMs > c.evictionMs {
		delete(c.sessions, lru.id)
		return true
	}
	if smallest != nil && size >= len(smallest.parts) {
		delete(c.sessions, smallest.id)
		return true
	}
	return false
}

// len is the number of cached sessions.
func (c *fetchSessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}
