package replication

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/partition"
)

// fetchState is one followed partition's state in its fetcher (Kafka's
// PartitionFetchState): the leader epoch it follows and, after an error, when to fetch
// it again. The fetch offset is the log's LEO and the last fetched epoch the log's latest
// batch epoch, read when each request is built.
type fetchState struct {
	leaderEpoch int32
	gen         uint64    // changes whenever the partition is (re)added: answers for an older gen are dropped
	delayUntil  time.Time // after an error: fetch again from then
	fenced      bool      // FENCED_LEADER_EPOCH: wait for a newer leader epoch (Follow)
	notLeader   int       // consecutive NOT_LEADER_OR_FOLLOWER / UNKNOWN_LEADER_EPOCH answers (notLeaderBackoff)
}

// notLeaderFirstBackoff is the first pause after the leader answers a partition with
// NOT_LEADER_OR_FOLLOWER or UNKNOWN_LEADER_EPOCH; it doubles with each such answer in a
// row, up to replica.fetch.backoff.ms.
const notLeaderFirstBackoff = 20 * time.Millisecond

// notLeaderBackoff is the pause after the n-th (from 0) NOT_LEADER_OR_FOLLOWER or
// UNKNOWN_LEADER_EPOCH answer in a row: 20 ms doubling up to max. After a failover the
// surviving follower often applies the new leadership from the metadata log a moment
// before the new leader does and fetches from it first; the leader answers so until it
// applies the same record, milliseconds later. Kafka waits replica.fetch.backoff.ms (1 s)
// there, during which the new leader's high watermark, and so every acks=all write to
// the partition, waits for this follower. A leader that really is not (this follower's
// metadata is stale) is retried at that full pause after about 1.3 s.
func notLeaderBackoff(n int, max time.Duration) time.Duration {
	if n >= 16 {
		return max
	}
	return min(max, notLeaderFirstBackoff<<n)
}

// fetcher fetches a set of partitions from one leader over its own connection, one
// Fetch in flight at a time (Kafka's ReplicaFetcherThread).
type fetcher struct {
	m    *Manager
	key  fetcherKey
	wake chan struct{}

	mu     sync.Mutex
	parts  map[*partition.Partition]*fetchState
	gen    uint64
	cancel context.CancelFunc // stops run; set by run
	done   bool
}

func newFetcher(m *Manager, k fetcherKey) *fetcher {
	return &fetcher{m: m, key: k, wake: make(chan struct{}, 1), parts: map[*partition.Partition]*fetchState{}}
}

// add fetches p at leaderEpoch, replacing its previous state.
func (f *fetcher) add(p *partition.Partition, leaderEpoch int32) {
	f.mu.Lock()
	f.gen++
	f.parts[p] = &fetchState{leaderEpoch: leaderEpoch, gen: f.gen}
	f.mu.Unlock()
	f.kick()
}

// remove stops fetching p and returns how many partitions are left.
func (f *fetcher) remove(p *partition.Partition) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.parts, p)
	return len(f.parts)
}

// stop ends run (the fetcher has no partitions left).
func (f *fetcher) stop() {
	f.mu.Lock()
	f.done = true
	cancel := f.cancel
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (f *fetcher) kick() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// sent is what a Fetch asked for one partition, to match and check its answer.
type sent struct {
	p           *partition.Partition
	gen         uint64
	leaderEpoch int32
	fetchOffset int64
}

// run fetches until ctx ends or stop is called.
func (f *fetcher) run(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	f.mu.Lock()
	f.cancel = cancel
	if f.done {
		cancel()
	}
	f.mu.Unlock()
	log := f.m.log.With("leader", f.key.leader, "fetcher", f.key.idx)
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for ctx.Err() == nil {
		req, asked, wait := f.buildRequest(time.Now())
		if req == nil {
			sleep(ctx, f.wake, wait)
			continue
		}
		if cl == nil {
			var err error
			if cl, err = f.m.opts.Dial(f.key.leader); err != nil {
				log.Warn("cannot reach the leader; retrying", "err", err)
				f.delay(asked, f.m.opts.Backoff)
				sleep(ctx, nil, f.m.opts.Backoff)
				continue
			}
		}
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("fetch from the leader failed; retrying", "partitions", len(asked), "err", err)
			cl.Close()
			cl = nil
			f.delay(asked, f.m.opts.Backoff)
			sleep(ctx, nil, f.m.opts.Backoff)
			continue
		}
		fr := resp.(*kmsg.FetchResponse)
		if fr.ErrorCode != 0 {
			log.Warn("fetch from the leader refused; retrying", "err", kerr.ErrorForCode(fr.ErrorCode))
			f.delay(asked, f.m.opts.Backoff)
			sleep(ctx, nil, f.m.opts.Backoff)
			continue
		}
		f.process(ctx, cl, fr, asked)
	}
}

// sleep waits for d, a wake-up or ctx.
func sleep(ctx context.Context, wake <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-wake:
	case <-t.C:
	}
}

// partKey matches an answer to its request: by topic ID (v13+) or name.
type partKey struct {
	id    [16]byte
	topic string
	p     int32
}

// buildRequest returns the Fetch for every partition ready to fetch, what it asked, and,
// when none is ready, how long until one is.
func (f *fetcher) buildRequest(now time.Time) (*kmsg.FetchRequest, map[partKey]sent, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := &f.m.opts
	wait := time.Hour
	var req *kmsg.FetchRequest
	asked := map[partKey]sent{}
	byTopic := map[[16]byte]int{}
	for p, st := range f.parts {
		if st.fenced {
			continue
		}
		if d := st.delayUntil.Sub(now); d > 0 {
			wait = min(wait, d)
			continue
		}
		if req == nil {
			req = kmsg.NewPtrFetchRequest()
			req.ReplicaID = o.NodeID
			req.ReplicaState.ID, req.ReplicaState.Epoch = o.NodeID, o.BrokerEpoch()
			req.MaxWaitMillis, req.MinBytes, req.MaxBytes = o.MaxWaitMs, o.MinBytes, o.MaxBytes
			req.IsolationLevel = 0
			req.SessionID, req.SessionEpoch = 0, -1 // no fetch session: every request is full
		}
		id := [16]byte(p.TopicID())
		i, ok := byTopic[id]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = p.Topic(), id
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[id] = i
		}
		l := p.Log()
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.Index()
		rp.CurrentLeaderEpoch = st.leaderEpoch
		rp.FetchOffset = l.LogEndOffset()
		rp.LastFetchedEpoch = -1
		if rp.FetchOffset > l.LogStartOffset() {
			rp.LastFetchedEpoch = l.LatestEpoch()
		}
		rp.LogStartOffset = l.LogStartOffset()
		rp.PartitionMaxBytes = o.PartitionMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		s := sent{p: p, gen: st.gen, leaderEpoch: st.leaderEpoch, fetchOffset: rp.FetchOffset}
		asked[partKey{id: id, p: rp.Partition}] = s
		asked[partKey{topic: p.Topic(), p: rp.Partition}] = s
	}
	return req, asked, wait
}

// current returns p's state when it is still the one s was asked with.
func (f *fetcher) current(s sent) *fetchState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.parts[s.p]
	if st == nil || st.gen != s.gen {
		return nil
	}
	return st
}

// delay holds back every partition of asked for d.
func (f *fetcher) delay(asked map[partKey]sent, d time.Duration) {
	until := time.Now().Add(d)
	for _, s := range asked {
		if st := f.current(s); st != nil {
			f.mu.Lock()
			st.delayUntil = until
			f.mu.Unlock()
		}
	}
}

// process applies one Fetch answer partition by partition (Kafka's
// AbstractFetcherThread.processFetchRequest). An answer for a partition whose state
// changed since the request was built is dropped.
func (f *fetcher) process(ctx context.Context, cl *kgo.Client, resp *kmsg.FetchResponse, asked map[partKey]sent) {
	log := f.m.log.With("leader", f.key.leader)
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			rp := &t.Partitions[pi]
			k := partKey{id: t.TopicID, p: rp.Partition}
			if t.TopicID == ([16]byte{}) {
				k = partKey{topic: t.Topic, p: rp.Partition}
			}
			s, ok := asked[k]
			if !ok {
				continue
			}
			st := f.current(s)
			if st == nil {
				continue // stale fetch state
			}
			retryIn := f.processPartition(ctx, cl, s, rp)
			switch rp.ErrorCode {
			case kerr.NotLeaderForPartition.Code, kerr.UnknownLeaderEpoch.Code:
				f.mu.Lock()
				retryIn = notLeaderBackoff(st.notLeader, f.m.opts.Backoff)
				st.notLeader++
				f.mu.Unlock()
			case 0:
				f.mu.Lock()
				st.notLeader = 0
				f.mu.Unlock()
			}
			if retryIn > 0 {
				f.mu.Lock()
				st.delayUntil = time.Now().Add(retryIn)
				f.mu.Unlock()
			}
			if rp.ErrorCode == kerr.FencedLeaderEpoch.Code {
				log.Info("the leader has a newer leader epoch; waiting for the metadata", "partition", s.p.String(), "leaderEpoch", s.leaderEpoch)
				f.mu.Lock()
				st.fenced = true
				f.mu.Unlock()
			}
		}
	}
}

// processPartition applies one partition's answer and returns how long to wait before
// fetching it again (0: at once).
func (f *fetcher) processPartition(ctx context.Context, cl *kgo.Client, s sent, rp *kmsg.FetchResponseTopicPartition) time.Duration {
	backoff := f.m.opts.Backoff
	p := s.p
	log := f.m.log.With("partition", p.String(), "leader", f.key.leader)
	switch err := kerr.ErrorForCode(rp.ErrorCode); err {
	case nil:
	case kerr.OffsetOutOfRange:
		if err := f.handleOutOfRange(ctx, cl, s); err != nil {
			log.Warn("resolving an out-of-range fetch offset failed; retrying", "fetchOffset", s.fetchOffset, "err", err)
			return backoff
		}
		return 0
	case kerr.FencedLeaderEpoch:
		return 0 // fenced: process marks it
	default:
		// NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH (process shortens their pause:
		// notLeaderBackoff), UNKNOWN_TOPIC_*, storage errors: the metadata will move the
		// partition, or the leader catches up.
		log.Debug("fetch error; retrying", "err", err)
		return backoff
	}
	if d := rp.DivergingEpoch; d.Epoch >= 0 || d.EndOffset >= 0 {
		return f.truncateDiverging(s, d.Epoch, d.EndOffset, log)
	}
	if len(rp.RecordBatches) > 0 {
		bound := s.leaderEpoch
		mle, mirrored := mirrorproto.MirrorLeaderEpoch(&rp.UnknownTags)
		if mirrored {
			bound = mle // a mirror partition: its batches carry the source's epochs
		}
		info, err := p.AppendAsFollower(s.leaderEpoch, bound, rp.RecordBatches)
		switch {
		case errors.Is(err, partition.ErrNotFollower):
			return 0
		case err != nil:
			log.Error("appending fetched batches failed", "fetchOffset", s.fetchOffset, "err", err)
			return backoff
		case info.FirstOffset < 0 && mirrored:
			// appended by the mirror leader after it took its MirrorLeaderEpoch: at once
			return 0
		case info.FirstOffset < 0:
			// every batch carries a leader epoch newer than this follower knows
			// (KAFKA-18723): fetch again once the metadata catches up
			return backoff
		}
	}
	if err := p.UpdateFollowerHighWatermark(s.leaderEpoch, rp.HighWatermark, rp.LogStartOffset); err != nil && !errors.Is(err, partition.ErrNotFollower) {
		log.Warn("taking the leader's high watermark failed", "err", err)
	}
	return 0
}

// truncateDiverging truncates where the local log parts from the leader's (KIP-320,
// Kafka's truncateOnFetchResponse): at the end the leader gave for the diverging epoch,
// or lower where the local log's own end of that epoch is (then the next fetch's
// LastFetchedEpoch may find an earlier divergence).
func (f *fetcher) truncateDiverging(s sent, epoch int32, endOffset int64, log *slog.Logger) time.Duration {
	l := s.p.Log()
	to := endOffset
	if _, localEnd := l.EndOffsetForEpoch(epoch); localEnd >= 0 {
		to = min(to, localEnd)
	}
	to = min(to, l.LogEndOffset())
	log.Info("truncating a diverging log", "divergingEpoch", epoch, "leaderEndOffset", endOffset, "truncateTo", to, "leo", l.LogEndOffset())
	if err := s.p.TruncateAsFollower(s.leaderEpoch, to); err != nil && !errors.Is(err, partition.ErrNotFollower) {
		log.Error("truncating a diverging log failed", "err", err)
		return f.m.opts.Backoff
	}
	return 0
}

// handleOutOfRange resolves OFFSET_OUT_OF_RANGE as Kafka's fetchOffsetAndTruncate: a
// local log past the leader's LEO is truncated to it; one below the leader's log start
// offset restarts there, empty.
func (f *fetcher) handleOutOfRange(ctx context.Context, cl *kgo.Client, s sent) error {
	leaderEnd, err := f.listOffset(ctx, cl, s, -1)
	if err != nil {
		return err
	}
	l := s.p.Log()
	if leaderEnd < l.LogEndOffset() {
		f.m.log.Info("truncating to the leader's log end offset", "partition", s.p.String(), "leo", l.LogEndOffset(), "leaderLEO", leaderEnd)
		return ignoreNotFollower(s.p.TruncateAsFollower(s.leaderEpoch, leaderEnd))
	}
	leaderStart, err := f.listOffset(ctx, cl, s, -2)
	if err != nil {
		return err
	}
	if leaderStart > l.LogEndOffset() {
		f.m.log.Info("restarting the log at the leader's log start offset", "partition", s.p.String(), "leo", l.LogEndOffset(), "leaderLogStart", leaderStart)
		return ignoreNotFollower(s.p.TruncateFullyAsFollower(s.leaderEpoch, leaderStart))
	}
	return nil
}

func ignoreNotFollower(err error) error {
	if errors.Is(err, partition.ErrNotFollower) {
		return nil
	}
	return err
}

// listOffset asks the leader for the partition's latest (−1: its LEO, as a replica asks)
// or earliest (−2) offset.
func (f *fetcher) listOffset(ctx context.Context, cl *kgo.Client, s sent, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = f.m.opts.NodeID
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = s.p.Topic()
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = s.p.Index(), s.leaderEpoch, ts
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, err
	}
	r := resp.(*kmsg.ListOffsetsResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return 0, errors.New("ListOffsets answered without the partition")
	}
	if err := kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode); err != nil {
		return 0, err
	}
	return r.Topics[0].Partitions[0].Offset, nil
}
