package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// fetcherKey names a fetcher: one per (mirror, source broker, index <
// mirror.num.replica.fetchers) (spec section 3).
type fetcherKey struct {
	broker int32
	idx    int
}

// fetcher sends consumer-style Fetch requests (replica ID −1, READ_UNCOMMITTED) to one
// source broker for the MIRRORING partitions it leads, and appends the answers.
type fetcher struct {
	r    *mirrorRT
	key  fetcherKey
	wake chan struct{}

	mu    sync.Mutex
	parts map[*partition]struct{}

	cancel context.CancelFunc
	done   chan struct{}

	// owned by the run goroutine
	conn    *fetchConn
	connSrc *source  // the source conn was dialed for
	bufs    [][]byte // response buffers free for reuse (at most two are in use)
}

func newFetcher(r *mirrorRT, key fetcherKey) *fetcher {
	ctx, cancel := context.WithCancel(r.ctx)
	f := &fetcher{r: r, key: key, wake: make(chan struct{}, 1), parts: map[*partition]struct{}{},
		cancel: cancel, done: make(chan struct{})}
	go f.run(ctx)
	return f
}

func (f *fetcher) stop() {
	f.cancel()
	<-f.done
}

// set replaces the fetcher's partitions.
func (f *fetcher) set(ps []*partition) {
	f.mu.Lock()
	f.parts = make(map[*partition]struct{}, len(ps))
	for _, p := range ps {
		f.parts[p] = struct{}{}
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) snapshot() []*partition {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*partition, 0, len(f.parts))
	for p := range f.parts {
		if p.state() == mirrorproto.StateMirroring {
			out = append(out, p)
		}
	}
	return out
}

func (f *fetcher) run(ctx context.Context) {
	defer close(f.done)
	defer f.closeConn()
	var pre *prefetch // the next Fetch, already sent
	for ctx.Err() == nil {
		ps := f.snapshot()
		if len(ps) == 0 {
			pre = nil
			f.bufs = nil // idle: give the response buffers back
			select {
			case <-ctx.Done():
				return
			case <-f.wake:
			}
			continue
		}
		ps, held := f.r.m.throttle.admit(ps)
		if len(ps) == 0 { // only throttled partitions, over the quota: wait for it
			pre = nil
			select {
			case <-ctx.Done():
				return
			case <-time.After(held):
			}
			f.r.m.throttle.held.Add(int64(held))
			continue
		}
		start := time.Now()
		var ok bool
		ok, pre = f.fetchOnce(ctx, ps, pre)
		if held > 0 {
			f.r.m.throttle.held.Add(int64(time.Since(start)))
		}
		if !ok {
			pre = nil
			select {
			case <-ctx.Done():
				return
			case <-time.After(f.r.cfgSnapshot().fetchBackoff):
			}
		}
	}
}

// fetchOnce sends one Fetch (or takes the valid prefetched one) and applies it; false
// asks for the fetch backoff. It returns the next Fetch when it could send it before
// appending (prefetch).
func (f *fetcher) fetchOnce(ctx context.Context, ps []*partition, pre *prefetch) (bool, *prefetch) {
	cfg := f.r.cfgSnapshot()
	src := f.r.sourceSnapshot()
	if src == nil {
		return false, nil
	}
	var resp *kmsg.FetchResponse
	var offsets map[kafka.TopicPartition]int64
	if pre != nil && f.conn != nil && f.conn.fetchV < fetchDivergingEpochVersion && f.anyNeedsEpochCheck(ps) {
		pre = nil // a truncation check comes first: the fetch after it is sequential
	}
	if pre.valid(src, ps) {
		resp, offsets = pre.wait(ctx, f)
		if ctx.Err() != nil {
			return true, nil
		}
	}
	var reqPos map[*partition]fetchPos
	var buf []byte
	var err error
	if resp == nil {
		var conn *fetchConn
		if conn, err = f.connFor(ctx, cfg, src); err == nil {
			if conn.fetchV < fetchDivergingEpochVersion {
				// no DivergingEpoch from this source: OffsetForLeaderEpoch first
				if ps = f.checkEpochs(ctx, cfg, conn, ps); len(ps) == 0 {
					return false, nil
				}
			}
			req, noIDs, offs, pos := f.buildFetch(cfg, ps, nil)
			if req == nil {
				return false, nil
			}
			offsets, reqPos = offs, pos
			f.r.fetchRequests.Add(1)
			resp = kmsg.NewPtrFetchResponse()
			buf, err = conn.fetch(ctx, req, noIDs, resp, f.getBuf(), fetchTimeout(cfg))
		}
	} else {
		reqPos, buf = pre.pos, pre.buf
	}
	defer f.putBuf(buf) // the batches of resp live in buf until they are appended
	if err != nil {
		if ctx.Err() != nil {
			return true, nil
		}
		f.r.fetchErrors.Add(1)
		f.r.m.log.Warn("mirror fetch failed", "mirror", f.r.name, "sourceBroker", f.key.broker, "err", err)
		f.r.requestMeta()
		msg := fmt.Sprintf("fetch from source broker %d over %s: %v", f.key.broker, cfg.describeSecurity(), err)
		if sourceUnreachable(err) {
			// a broker down or restarting: its partitions' leadership moves to another
			// source broker within the source's broker.session.timeout.ms, and the
			// metadata refresh just asked for hands them to that broker's fetcher; until
			// then they are retried here, as Kafka's replica fetcher retries a leader it
			// cannot reach. Only a source unreachable for longer than a leader failover
			// takes (unreachableGrace) fails them, so that the outage shows in describe.
			now := time.Now()
			for _, p := range ps {
				p.mu.Lock()
				if p.unreachableSince.IsZero() {
					p.unreachableSince = now
				} else if now.Sub(p.unreachableSince) >= unreachableGrace(cfg) {
					p.unreachableSince = time.Time{}
					p.fail(msg, false)
				}
				p.mu.Unlock()
			}
			return false, nil
		}
		for _, p := range ps {
			p.mu.Lock()
			p.fetchErrs++
			if p.fetchErrs >= 3 {
				p.fetchErrs = 0
				p.fail(msg, false)
			}
			p.mu.Unlock()
		}
		return false, nil
	}
	if resp.ErrorCode != 0 {
		f.r.fetchErrors.Add(1)
		f.r.m.log.Warn("mirror fetch error", "mirror", f.r.name, "sourceBroker", f.key.broker,
			"err", kerr.ErrorForCode(resp.ErrorCode))
		f.r.requestMeta()
		return false, nil
	}
	idx := newFetchIndex(ps)
	idx.each(resp, func(p *partition, _ kafka.TopicPartition, rp *kmsg.FetchResponseTopicPartition) bool {
		if rp.ErrorCode == 0 {
			p.sizeFetch(cfg, rp, len(ps)) // before the prefetch asks for the next round
		}
		return true
	})
	var next *prefetch
	if !idx.anyThrottled || !f.r.m.throttle.record(idx.throttledBytes(resp)) {
		// over the quota the next round leaves the throttled partitions out: no prefetch
		next = f.startPrefetch(ctx, cfg, src, ps, idx, resp, reqPos)
	}
	total := 0
	ok := true
	idx.each(resp, func(p *partition, k kafka.TopicPartition, rp *kmsg.FetchResponseTopicPartition) bool {
		total += len(rp.RecordBatches)
		if rp.ErrorCode != 0 {
			f.r.fetchErrors.Add(1)
		}
		fr := fetchResult{fetchOffset: offsets[k], resp: rp, sourceStart: -1, sourceEnd: -1}
		if rp.ErrorCode == kerr.OffsetOutOfRange.Code {
			fr.sourceStart, fr.sourceEnd = f.sourceRange(ctx, src, p)
		}
		if p.applyFetch(fr) {
			f.r.requestMeta()
			ok = false
		}
		if p.runnerNeeded() {
			f.r.kick()
		}
		return true
	})
	if !ok || !next.valid(src, ps) {
		next = nil // unusual: drop the prefetch, the next round fetches sequentially
	}
	return ok || total > 0, next
}

// unreachableGrace is how long fetches may find a source broker unreachable (refused,
// reset, timed out) before its partitions go FAILED: twice request.timeout.ms (60 s by
// default), well past a source leader failover (Kafka's broker.session.timeout.ms is 9 s).
func unreachableGrace(cfg *mirrorConfig) time.Duration { return 2 * cfg.requestTimeout }

// fetchTimeout bounds one Fetch round trip: the long poll plus request.timeout.ms.
func fetchTimeout(cfg *mirrorConfig) time.Duration {
	return time.Duration(cfg.fetchWaitMaxMs)*time.Millisecond + cfg.requestTimeout
}

// connFor returns the fetcher's connection to its source broker, dialing it when there
// is none, it broke, or the source changed.
func (f *fetcher) connFor(ctx context.Context, cfg *mirrorConfig, src *source) (*fetchConn, error) {
	if f.conn != nil && f.connSrc == src && f.conn.usable() {
		return f.conn, nil
	}
	f.closeConn()
	addr := src.brokerAddr(f.key.broker)
	if addr == "" {
		return nil, fmt.Errorf("no address known for source broker %d", f.key.broker)
	}
	c, err := dialFetchConn(ctx, cfg, addr, "kmirror-mirror-"+f.r.name)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	f.conn, f.connSrc = c, src
	return c, nil
}

func (f *fetcher) closeConn() {
	if f.conn != nil {
		f.conn.close()
		f.conn, f.connSrc = nil, nil
	}
}

// getBuf returns a response buffer to read into; putBuf gives it back once the batches
// in it are appended.
func (f *fetcher) getBuf() []byte {
	if n := len(f.bufs); n > 0 {
		b := f.bufs[n-1]
		f.bufs = f.bufs[:n-1]
		return b
	}
	return nil
}

func (f *fetcher) putBuf(b []byte) {
	if cap(b) > 0 && len(f.bufs) < 2 {
		f.bufs = append(f.bufs, b[:0])
	}
}

// sourceRange looks up the source log start and end of p after OFFSET_OUT_OF_RANGE.
func (f *fetcher) sourceRange(ctx context.Context, src *source, p *partition) (int64, int64) {
	start, err1 := src.listOffset(ctx, p.topic, p.index, listEarliest)
	end, err2 := src.listOffset(ctx, p.topic, p.index, listLatest)
	if err := errors.Join(err1, err2); err != nil {
		f.r.m.log.Warn("mirror: source offsets after OFFSET_OUT_OF_RANGE", "partition", p.String(), "err", err)
		return -1, -1
	}
	return start, end
}

// sourceUnreachable reports a transport error of a fetch: the source broker refused,
// reset or closed the connection or did not answer within request.timeout.ms — as
// opposed to a refusal of the connection's settings (TLS, SASL, versions) or a broker
// the source metadata does not name (its Metadata refused too), which no leader change
// cures.
func sourceUnreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded)
}

// runnerNeeded reports whether the partition waits for its runner: an EPOCH_FENCING raise
// is scheduled, or it entered ULE_RECOVERY.
func (p *partition) runnerNeeded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raiseTo != 0 || p.st.State == mirrorproto.StateULERecovery
}

// fetchIndex finds a fetch's partitions in its response, by topic ID (Fetch v13+) or by
// name.
type fetchIndex struct {
	byID         map[metadata.TopicID]string
	parts        map[kafka.TopicPartition]*partition
	anyThrottled bool
}

func newFetchIndex(ps []*partition) fetchIndex {
	x := fetchIndex{byID: make(map[metadata.TopicID]string, len(ps)), parts: make(map[kafka.TopicPartition]*partition, len(ps))}
	for _, p := range ps {
		x.byID[p.topicID] = p.topic
		x.parts[kafka.TopicPartition{Topic: p.topic, Partition: p.index}] = p
		x.anyThrottled = x.anyThrottled || p.throttled.Load()
	}
	return x
}

// each calls fn for every partition of resp that is one of the fetch's, in response
// order, until fn returns false; it reports whether it went through all of them.
func (x fetchIndex) each(resp *kmsg.FetchResponse, fn func(p *partition, k kafka.TopicPartition, rp *kmsg.FetchResponseTopicPartition) bool) bool {
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		name := rt.Topic
		if n, found := x.byID[rt.TopicID]; found && rt.TopicID != (metadata.TopicID{}) {
			name = n
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			k := kafka.TopicPartition{Topic: name, Partition: rp.Partition}
			if p := x.parts[k]; p != nil && !fn(p, k, rp) {
				return false
			}
		}
	}
	return true
}

// throttledBytes sums the record bytes of resp's throttled partitions.
func (x fetchIndex) throttledBytes(resp *kmsg.FetchResponse) int {
	n := 0
	x.each(resp, func(p *partition, _ kafka.TopicPartition, rp *kmsg.FetchResponseTopicPartition) bool {
		if p.throttled.Load() {
			n += len(rp.RecordBatches)
		}
		return true
	})
	return n
}

// throttle is the broker's mirror replication quota (mirror.replication.throttled.rate,
// bytes/s; 0 = unlimited), Kafka's ReplicationQuotaManager for follower replication
// (KIP-73) as a token bucket: the fetched bytes of throttled partitions (their topic's
// mirror.replication.throttled.replicas lists them) take tokens, which refill at the rate
// up to one second's worth. While the bucket is empty the fetchers leave the throttled
// partitions out of their Fetch requests and go on with the others, as Kafka's replica
// fetcher does; a fetcher with only throttled partitions waits for the refill. A rate
// change (dynamic broker config) starts a full bucket at once.
type throttle struct {
	mu     sync.Mutex
	rate   int64
	tokens float64   // bytes; negative: debt
	at     time.Time // last refill
	// held counts the time (ns) throttled partitions were left out or waited for, for
	// kmirror_mirror_throttle_seconds_total
	held atomic.Int64
}

// maxThrottleWait bounds one wait so that a rate change is seen soon.
const maxThrottleWait = 100 * time.Millisecond

func (t *throttle) setRate(r int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r = max(r, 0); r != t.rate {
		t.rate, t.tokens, t.at = r, float64(r), time.Now()
	}
}

// refill adds the tokens earned since the last refill. mu held.
func (t *throttle) refill(now time.Time) {
	t.tokens = min(float64(t.rate), t.tokens+now.Sub(t.at).Seconds()*float64(t.rate))
	t.at = now
}

// admit returns the partitions of ps a Fetch may include now: all of them under the
// quota, only the unthrottled ones over it. held > 0 says throttled partitions were left
// out; when none is left it is how long to wait (at most maxThrottleWait).
func (t *throttle) admit(ps []*partition) (open []*partition, held time.Duration) {
	t.mu.Lock()
	over := t.rate > 0
	if over {
		t.refill(time.Now())
		over = t.tokens <= 0
		if over {
			held = time.Duration(-t.tokens/float64(t.rate)*float64(time.Second)) + time.Millisecond
		}
	}
	t.mu.Unlock()
	if !over {
		return ps, 0
	}
	open = make([]*partition, 0, len(ps))
	for _, p := range ps {
		if !p.throttled.Load() {
			open = append(open, p)
		}
	}
	if len(open) == len(ps) {
		return ps, 0
	}
	return open, min(held, maxThrottleWait)
}

// record takes n fetched bytes of throttled partitions from the bucket and reports
// whether the quota is now exceeded.
func (t *throttle) record(n int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rate <= 0 {
		return false
	}
	t.refill(time.Now())
	t.tokens -= float64(n)
	return t.tokens <= 0
}

// isThrottledReplica reads a mirror.replication.throttled.replicas value as Kafka reads
// follower.replication.throttled.replicas: "*" is every partition, otherwise a list of
// partition:brokerID pairs; empty throttles nothing.
func isThrottledReplica(list string, partition, nodeID int32) bool {
	list = strings.TrimSpace(list)
	if list == "*" {
		return true
	}
	want := fmt.Sprintf("%d:%d", partition, nodeID)
	for _, e := range strings.Split(list, ",") {
		if strings.TrimSpace(e) == want {
			return true
		}
	}
	return false
}
