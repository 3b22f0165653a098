package mirror

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/record"
)

// fetchPos is where a partition's next fetch starts: FetchOffset and LastFetchedEpoch.
type fetchPos struct {
	offset int64
	epoch  int32
}

// prefetch is the next Fetch, sent before the current response is appended (issue 4:
// the fetcher is bound by round trips). It is sent only when every partition of the
// current response is ordinary (no error, no DivergingEpoch, no log start jump, no
// straddling batch) and is used only when, after the append, every partition's LEO and
// last fetched epoch are exactly the predicted ones and the partition set is unchanged;
// otherwise it is dropped and the fetcher falls back to a fresh sequential fetch, so
// each batch is still appended exactly once (applyFetch also drops stale responses).
type prefetch struct {
	src     *source
	pos     map[*partition]fetchPos
	offsets map[kafka.TopicPartition]int64
	done    chan struct{}
	resp    *kmsg.FetchResponse
	buf     []byte // holds resp's record batches
	err     error
}

// buildFetch builds a Fetch for ps at pos (nil: at each local LEO and last fetched
// epoch). It returns nil when no partition can be fetched; noIDs is true when a source
// topic has no topic ID (the request must then be v12 or lower, addressing topics by
// name).
func (f *fetcher) buildFetch(cfg *mirrorConfig, ps []*partition, pos map[*partition]fetchPos) (req *kmsg.FetchRequest, noIDs bool, offsets map[kafka.TopicPartition]int64, used map[*partition]fetchPos) {
	req = kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.ReplicaState.ID = -1
	req.MaxWaitMillis = cfg.fetchWaitMaxMs
	req.MinBytes = cfg.fetchMinBytes
	req.MaxBytes = cfg.fetchRespMax
	req.IsolationLevel = 0
	req.SessionEpoch = -1
	offsets = map[kafka.TopicPartition]int64{}
	used = map[*partition]fetchPos{}
	topicIdx := map[string]int{}
	for _, p := range ps {
		fp, ok := pos[p]
		if !ok {
			p.mu.Lock()
			l, err := p.getLog()
			if err != nil {
				p.fail("open local log: "+err.Error(), false)
				p.mu.Unlock()
				continue
			}
			fp = fetchPos{l.LogEndOffset(), p.lastFetchedEpoch(l)}
			p.mu.Unlock()
		}
		if p.topicID == (metadata.TopicID{}) || p.byName {
			noIDs = true
		}
		i, ok := topicIdx[p.topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = p.topic
			t.TopicID = p.topicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topicIdx[p.topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.index
		rp.FetchOffset = fp.offset
		rp.LastFetchedEpoch = fp.epoch
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = p.partitionMaxBytes(cfg)
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		offsets[kafka.TopicPartition{Topic: p.topic, Partition: p.index}] = fp.offset
		used[p] = fp
	}
	if len(req.Topics) == 0 {
		return nil, false, nil, nil
	}
	return req, noIDs, offsets, used
}

// partitionMaxBytes is the PartitionMaxBytes of p's next fetch: fetch.max.bytes, or more
// while the source's responses for p come back full (sizeFetch).
func (p *partition) partitionMaxBytes(cfg *mirrorConfig) int32 {
	return max(cfg.fetchMaxBytes, p.fetchBytes.Load())
}

// sizeFetch adapts p's per-partition fetch size to rp, the source's answer for p in a
// fetch of n partitions. While the source holds more than it returned (its HW past the
// end of the batches: the fetch size, not the data, bounded the response) the size
// doubles, up to p's share of fetch.response.max.bytes (and of the largest response a
// fetch connection reads), so that a mirror of few partitions is bound neither by
// fetch.max.bytes nor by the round-trip time while each partition of a fetch keeps room
// in the response. Fullness is not the test: the source returns whole batches only, so a
// response of batches a little over half the fetch size is as full as it gets. Once
// caught up, a response under a quarter of the size halves it, down to fetch.max.bytes,
// so that an idle partition does not keep a large buffer's worth. Only batch headers
// are read.
func (p *partition) sizeFetch(cfg *mirrorConfig, rp *kmsg.FetchResponseTopicPartition, n int) {
	cur := int64(p.partitionMaxBytes(cfg))
	limit := max(int64(cfg.fetchMaxBytes), min(int64(cfg.fetchRespMax), maxFetchResponseBytes/2)/int64(max(n, 1)))
	got := int64(len(rp.RecordBatches))
	end, ok := predictNext(rp.RecordBatches, fetchPos{})
	backlog := ok && got > 0 && rp.HighWatermark > end.offset
	switch {
	case cur > limit: // more partitions share the fetch than when it grew
		p.fetchBytes.Store(int32(limit))
	case backlog && cur < limit:
		p.fetchBytes.Store(int32(min(limit, 2*cur)))
	case !backlog && got < cur/4 && cur > int64(cfg.fetchMaxBytes):
		p.fetchBytes.Store(int32(max(int64(cfg.fetchMaxBytes), cur/2)))
	}
}

// startPrefetch predicts every partition's position after resp is appended (from the
// last whole batch, without decoding or CRC) and sends the next Fetch in the
// background; nil when anything in resp is unusual.
func (f *fetcher) startPrefetch(ctx context.Context, cfg *mirrorConfig, src *source, ps []*partition, idx fetchIndex,
	resp *kmsg.FetchResponse, reqPos map[*partition]fetchPos) *prefetch {
	if resp.ErrorCode != 0 || len(reqPos) != len(ps) {
		return nil
	}
	total := 0
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			total += len(resp.Topics[i].Partitions[j].RecordBatches)
		}
	}
	if total == 0 {
		return nil // idle: the next Fetch is a long poll, keep it sequential
	}
	pos := make(map[*partition]fetchPos, len(reqPos))
	for p, fp := range reqPos {
		pos[p] = fp
	}
	usual := idx.each(resp, func(p *partition, _ kafka.TopicPartition, rp *kmsg.FetchResponseTopicPartition) bool {
		fp := reqPos[p]
		if rp.ErrorCode != 0 || (rp.DivergingEpoch.Epoch >= 0 && rp.DivergingEpoch.EndOffset >= 0) ||
			rp.LogStartOffset > fp.offset {
			return false
		}
		next, ok := predictNext(rp.RecordBatches, fp)
		pos[p] = next
		return ok
	})
	if !usual {
		return nil
	}
	req, noIDs, offsets, used := f.buildFetch(cfg, ps, pos)
	if req == nil || len(used) != len(ps) || f.conn == nil || f.connSrc != src || !f.conn.usable() {
		return nil // a broken or expiring connection is replaced by the next sequential fetch
	}
	pf := &prefetch{src: src, pos: used, offsets: offsets, done: make(chan struct{}), resp: kmsg.NewPtrFetchResponse()}
	conn, buf := f.conn, f.getBuf()
	f.r.fetchRequests.Add(1)
	go func() {
		defer close(pf.done)
		pf.buf, pf.err = conn.fetch(ctx, req, noIDs, pf.resp, buf, fetchTimeout(cfg))
	}()
	return pf
}

// predictNext is the position after appendBatches appends data fetched at fp: after
// the last whole batch at or above fp.offset. ok is false for anything appendBatches
// would not append as is (framing error, a batch straddling or below the fetch offset).
func predictNext(data []byte, fp fetchPos) (fetchPos, bool) {
	for len(data) > 0 {
		b, rest, err := record.Next(data)
		if err == record.ErrTruncate {
			break
		}
		if err != nil || len(b) < record.HeaderSize {
			return fp, false
		}
		if b.BaseOffset() < fp.offset {
			return fp, false
		}
		fp = fetchPos{b.NextOffset(), b.LeaderEpoch()}
		data = rest
	}
	return fp, true
}

// valid reports whether pf may be used for ps now: same source and partitions, and
// every partition is MIRRORING at exactly the predicted LEO and last fetched epoch with
// no epoch raise pending.
func (pf *prefetch) valid(src *source, ps []*partition) bool {
	if pf == nil || pf.src != src || len(pf.pos) != len(ps) {
		return false
	}
	for _, p := range ps {
		want, ok := pf.pos[p]
		if !ok || !p.atPos(want) {
			return false
		}
	}
	return true
}

func (p *partition) atPos(want fetchPos) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st.State != mirrorproto.StateMirroring || p.raiseTo != 0 {
		return false
	}
	l, err := p.getLog()
	if err != nil {
		return false
	}
	return l.LogEndOffset() == want.offset && p.lastFetchedEpoch(l) == want.epoch
}

// wait returns the prefetched response, or nil when the request failed (counted and
// logged here; the caller fetches again sequentially, on a new connection) or ctx ended.
func (pf *prefetch) wait(ctx context.Context, f *fetcher) (*kmsg.FetchResponse, map[kafka.TopicPartition]int64) {
	select {
	case <-ctx.Done():
		return nil, nil
	case <-pf.done:
	}
	if pf.err != nil {
		if ctx.Err() == nil {
			f.r.fetchErrors.Add(1)
			f.r.m.log.Warn("mirror prefetch failed; fetching again", "mirror", f.r.name, "sourceBroker", f.key.broker, "err", pf.err)
		}
		return nil, nil
	}
	return pf.resp, pf.offsets
}
