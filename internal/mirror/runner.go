package mirror

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/storage"
)

// mirrorRT runs one cluster mirror: its source connection, the periodic source metadata
// refresh (leaders, topic deletion and recreation, partition growth, cluster ID check,
// topics.include discovery), the partition state machine (spec section 4) and the
// assignment of MIRRORING partitions to fetchers. One goroutine drives it (the
// partitions that talk to the source in LOG_ALIGNMENT on helpers it waits for); RPC
// handlers change desired states in the metadata log and kick it.
type mirrorRT struct {
	m    *Manager
	name string

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}

	// guarded by the runner goroutine, read by fetchers through the snapshots
	cfgMu    chan struct{} // 1-slot lock for cfg/src
	cfg      *mirrorConfig
	src      *source
	connKey  string
	rawKey   string
	fetchers map[fetcherKey]*fetcher

	needMeta chan struct{}
	lastMeta time.Time
	// abortMeta cancels an in-flight source metadata refresh: a failover needs no
	// source and must not wait request.timeout.ms for one that is gone (failoverPending)
	abortMeta chan struct{}

	// Fetch counters of spec section 13 (FetchStats)
	fetchRequests, fetchErrors atomic.Int64
	nFetchers                  atomic.Int32 // len(fetchers), readable off the runner goroutine
	suspect                    map[string]int

	// status of the periodic metadata sync tasks (sync.go), run by syncLoop
	status   *syncStatus
	syncDone chan struct{}
	// syncedKeys remembers, per topic, the config keys copied from the source at the
	// last topic config sync (owned by syncLoop)
	syncedKeys map[string]map[string]bool
	// syncedACLs are the source bindings the ACL task selected at its last run (the ones
	// it removes from the destination once they vanish from the source), and
	// aclSyncSkippedLogged whether the skip for a source without an authorizer was
	// logged (sync_acls.go).
	syncedACLs           map[acl.Binding]bool
	aclSyncSkippedLogged bool
	// warnedActive remembers groups skipped as active on the destination, so that the
	// warning is logged once per group and state (owned by syncLoop)
	warnedActive map[string]string
}

func newMirrorRT(m *Manager, name string) *mirrorRT {
	ctx, cancel := context.WithCancel(m.ctx)
	r := &mirrorRT{m: m, name: name, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		wake: make(chan struct{}, 1), cfgMu: make(chan struct{}, 1), fetchers: map[fetcherKey]*fetcher{},
		needMeta: make(chan struct{}, 1), abortMeta: make(chan struct{}, 1), suspect: map[string]int{},
		status: newSyncStatus(), syncDone: make(chan struct{}),
		syncedKeys: map[string]map[string]bool{}, warnedActive: map[string]string{}}
	go r.run()
	go r.syncLoop()
	return r
}

func (r *mirrorRT) lock()   { r.cfgMu <- struct{}{} }
func (r *mirrorRT) unlock() { <-r.cfgMu }

func (r *mirrorRT) cfgSnapshot() *mirrorConfig {
	r.lock()
	defer r.unlock()
	return r.cfg
}

func (r *mirrorRT) sourceSnapshot() *source {
	r.lock()
	defer r.unlock()
	return r.src
}

// kick wakes the runner.
func (r *mirrorRT) kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// requestMeta asks for a source metadata refresh on the next tick.
func (r *mirrorRT) requestMeta() {
	select {
	case r.needMeta <- struct{}{}:
	default:
	}
	r.kick()
}

// failoverPending tells the runner that a partition it runs is to fail over: a source
// metadata refresh in flight gives up (and is retried on a later tick), so that the
// failover runs at once even when the source is down (a DR failover after the source
// died: its refresh would wait request.timeout.ms, longer than StopMirrorTopics waits).
func (r *mirrorRT) failoverPending() {
	select {
	case r.abortMeta <- struct{}{}:
	default:
	}
}

func (r *mirrorRT) stop() {
	r.cancel()
	<-r.syncDone
	<-r.done
}

func (r *mirrorRT) run() {
	defer close(r.done)
	defer func() {
		for _, f := range r.fetchers {
			f.stop()
		}
		r.lock()
		if r.src != nil {
			r.src.close()
		}
		r.unlock()
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
		next := r.tick()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// tick does one round of work and returns when the next round is due.
func (r *mirrorRT) tick() time.Duration {
	refresh := time.Duration(r.m.config().RefreshIntervalMs) * time.Millisecond
	im := r.m.local.Metadata().Image()
	mir, ok := im.Mirrors[r.name]
	if !ok {
		return refresh
	}
	if err := r.connect(mir); err != nil {
		r.m.log.Error("mirror configuration", "mirror", r.name, "err", err)
		return refresh
	}
	parts := r.m.partitionsOf(r.name)
	wait := refresh
	need := time.Since(r.lastMeta) >= refresh
	select {
	case <-r.needMeta:
		need = true
	default:
	}
	failing := false // a failover to run: it needs no source, so no refresh holds it up
	for _, p := range parts {
		if p.leader.Load() < 0 && activeState(p.state()) {
			need = true
		}
		t := im.Topics[p.topic]
		if st := p.state(); st == mirrorproto.StateStopping ||
			st != mirrorproto.StateStopped && t != nil && t.Mirror != nil && t.Mirror.Desired == metadata.DesiredStopped {
			failing = true
		}
	}
	if need && !failing {
		err := r.refreshMeta(im, mir, parts)
		if r.ctx.Err() == nil {
			r.report(TaskSourceMetadata, err)
		}
		if err != nil {
			wait = min(wait, r.cfg.fetchBackoff)
		} else if len(r.suspect) > 0 {
			wait = min(wait, r.cfg.fetchBackoff)
			r.requestMetaLater()
		}
	}
	// Partitions that may talk to the source (LOG_ALIGNMENT and what leads to it: a
	// retry from FAILED, a start, a failback) are driven concurrently, up to
	// alignConcurrency at a time: each waits for its source lookups, up to
	// request.timeout.ms while the source is unreachable, and one after another they
	// would take that long each. The others are driven here, in order.
	var wg sync.WaitGroup
	var waitMu sync.Mutex
	note := func(d time.Duration) {
		if d > 0 {
			waitMu.Lock()
			wait = min(wait, d)
			waitMu.Unlock()
		}
	}
	sem := make(chan struct{}, alignConcurrency)
	for _, p := range parts {
		if r.ctx.Err() != nil {
			break
		}
		if r.m.local.Metadata().Image().Mirrors[r.name] != mir {
			// the mirror's configs changed (an unreachable source makes every LOG_ALIGNMENT
			// wait for request.timeout.ms): apply them before driving further partitions
			wg.Wait()
			return time.Millisecond
		}
		switch p.state() {
		case mirrorproto.StateLogAlignment, mirrorproto.StateFailed, mirrorproto.StateUnknown, mirrorproto.StateStopped:
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				note(r.drive(p, im, mir))
			}()
		default:
			note(r.drive(p, im, mir))
		}
	}
	wg.Wait()
	if r.ctx.Err() != nil {
		return wait
	}
	r.assign(parts)
	return max(wait, time.Millisecond)
}

// alignConcurrency bounds the partitions of one mirror driven at once through
// LOG_ALIGNMENT (each sends its own lookups to the source).
const alignConcurrency = 32

func (r *mirrorRT) requestMetaLater() {
	select {
	case r.needMeta <- struct{}{}:
	default:
	}
}

// activeState reports states in which the partition wants a source leader.
func activeState(s mirrorproto.State) bool {
	switch s {
	case mirrorproto.StateStopped, mirrorproto.StateStopping, mirrorproto.StatePaused, mirrorproto.StateFailed:
		return false
	}
	return true
}

// connect (re)creates the source client when the connection settings changed.
func (r *mirrorRT) connect(mir *metadata.Mirror) error {
	raw := normalizeConfigs(mir.Configs)
	rawKey := fmt.Sprint(raw)
	if r.cfg != nil && rawKey == r.rawKey {
		return nil
	}
	cfg, err := parseMirrorConfig(raw)
	if err != nil {
		return err
	}
	key := connectionKey(raw)
	if r.src == nil || key != r.connKey {
		for k, f := range r.fetchers {
			f.stop()
			delete(r.fetchers, k)
		}
		r.nFetchers.Store(0)
		src, err := newSource(r.name, cfg)
		if err != nil {
			return err
		}
		r.lock()
		if r.src != nil {
			r.src.close()
		}
		r.src = src
		r.unlock()
		r.connKey = key
		r.lastMeta = time.Time{}
		if r.rawKey != "" {
			r.m.log.Info("mirror connection settings changed: reconnected", "mirror", r.name)
		}
	}
	r.lock()
	r.cfg = cfg
	r.unlock()
	r.rawKey = rawKey
	return nil
}

// refreshMeta asks the source for the mirror's topics and applies what it learns.
func (r *mirrorRT) refreshMeta(im *metadata.Image, mir *metadata.Mirror, parts []*partition) error {
	topicSet := map[string]bool{}
	for _, p := range parts {
		if t := im.Topics[p.topic]; t != nil && t.Mirror != nil && t.Mirror.Desired != metadata.DesiredStopped {
			topicSet[p.topic] = true
		}
	}
	topics := make([]string, 0, len(topicSet))
	for t := range topicSet {
		topics = append(topics, t)
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.requestTimeout)
	defer cancel()
	refreshed := make(chan struct{})
	defer close(refreshed)
	go func() {
		select {
		case <-r.abortMeta:
			cancel()
		case <-refreshed:
		}
	}()
	meta, err := r.src.metadata(ctx, topics)
	if err != nil {
		return err
	}
	r.lastMeta = time.Now()
	if mir.SourceClusterID != "" && meta.clusterID != "" && meta.clusterID != mir.SourceClusterID {
		msg := fmt.Sprintf("The source cluster ID changed from %s to %s.", mir.SourceClusterID, meta.clusterID)
		for _, p := range parts {
			p.failNonRetryable(msg)
		}
		return nil
	}
	byTopic := map[string][]*partition{}
	for _, p := range parts {
		byTopic[p.topic] = append(byTopic[p.topic], p)
	}
	for _, name := range topics {
		lt := im.Topics[name]
		st := meta.topics[name]
		if st == nil {
			r.suspect[name]++
			if r.suspect[name] >= 2 { // confirmed by a second listing (spec section 8)
				delete(r.suspect, name)
				for _, p := range byTopic[name] {
					p.failNonRetryable("The source topic is deleted.")
				}
			}
			continue
		}
		delete(r.suspect, name)
		if st.id != (metadata.TopicID{}) && lt.Mirror.SourceTopicID != (metadata.TopicID{}) && st.id != lt.Mirror.SourceTopicID {
			msg := fmt.Sprintf("The source topic was recreated with a new topic ID %s (the mirror topic has %s).",
				topicIDString(st.id), topicIDString(lt.Mirror.SourceTopicID))
			for _, p := range byTopic[name] {
				p.failNonRetryable(msg)
			}
			continue
		}
		n := int32(len(st.partitions))
		switch {
		case n < lt.Partitions:
			msg := fmt.Sprintf("The source topic has %d partitions, fewer than the %d of the mirror topic.", n, lt.Partitions)
			for _, p := range byTopic[name] {
				p.failNonRetryable(msg)
			}
			continue
		case n > lt.Partitions:
			// follow source partition growth (spec section 8); new partitions start in
			// LOG_ALIGNMENT through reconcile
			if err := r.m.local.CreatePartitions(ctx, name, n); err != nil {
				r.m.log.Warn("mirror: follow source partition growth", "topic", name, "partitions", n, "err", err)
			} else {
				r.m.log.Info("mirror: source partitions grew", "mirror", r.name, "topic", name, "partitions", n)
			}
		}
		for _, sp := range st.partitions {
			p := r.m.partitionOf(name, sp.Partition)
			if p == nil {
				continue
			}
			if sp.ErrorCode == 0 && sp.Leader >= 0 {
				p.leader.Store(sp.Leader)
				p.srcLeaderEpoch.Store(sp.LeaderEpoch)
				p.noteSourceEpoch(sp.LeaderEpoch)
			} else {
				p.leader.Store(-1)
			}
		}
	}
	return nil
}

func (p *partition) failNonRetryable(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st.State == mirrorproto.StateFailed && p.st.RetryAttempt == mirrorproto.RetryAttemptNonRetryable {
		return
	}
	p.fail(msg, true)
}

// drive advances one partition towards its desired state (spec section 4) and returns
// when it wants to be looked at again (0 = no particular time).
func (r *mirrorRT) drive(p *partition, im *metadata.Image, mir *metadata.Mirror) time.Duration {
	t := im.Topics[p.topic]
	if t == nil || t.Mirror == nil || t.ID != p.topicID {
		return 0
	}
	unclean := strings.EqualFold(t.Configs[cfgUncleanElection], "true")
	p.uncleanOptIn.Store(unclean)
	p.mu.Lock()
	// Act on the newest desired state, read under mu: im is tick's snapshot, and an RPC
	// (stop, pause) records the desired state before it changes the partition under mu.
	// A stale "mirroring" would otherwise take a partition the RPC just STOPPED back to
	// LOG_ALIGNMENT, whose truncation could drop what was written after the failover.
	desired := t.Mirror.Desired
	if cur := r.m.local.Metadata().Image().Topics[p.topic]; cur != nil && cur.Mirror != nil && cur.ID == p.topicID {
		desired = cur.Mirror.Desired
	}
	p.catchUpEpoch()
	if desired == metadata.DesiredStopped {
		stopped := p.st.State == mirrorproto.StateStopped
		p.mu.Unlock()
		if !stopped {
			if err := p.failover(mir.SourceClusterID); err != nil {
				r.m.log.Error("mirror failover", "mirror", r.name, "partition", p.String(), "err", err)
				return time.Second
			}
		}
		return 0
	}
	switch p.st.State {
	case mirrorproto.StateStopping:
		p.mu.Unlock()
		if err := p.failover(mir.SourceClusterID); err != nil {
			return time.Second
		}
		return time.Millisecond
	case mirrorproto.StateUnknown, mirrorproto.StateStopped:
		if p.st.State == mirrorproto.StateStopped {
			// a failback or re-attach: its truncation report replaces the last one, even
			// when it truncates nothing, and the source HW of the failover is no figure for
			// it (source-offsets or the first fetch gives the current one)
			p.st.TruncatedOffset, p.st.TruncatedRecords = -1, 0
			p.sourceHW.Store(-1)
		}
		p.setState(mirrorproto.StateLogAlignment, "")
	case mirrorproto.StatePausing:
		p.setState(mirrorproto.StatePaused, "")
	case mirrorproto.StatePaused:
		if desired == metadata.DesiredMirroring {
			p.setState(mirrorproto.StateMirroring, "") // resume from the LEO, no truncation
		}
	case mirrorproto.StateMirroring:
		if desired == metadata.DesiredPaused {
			p.setState(mirrorproto.StatePausing, "")
			p.setState(mirrorproto.StatePaused, "")
		} else {
			p.maybeRaiseEpoch()
		}
	case mirrorproto.StateEpochFencing:
		p.setState(mirrorproto.StateMirroring, "")
	case mirrorproto.StateULERecovery:
		// the source lost records by an unclean leader election and this leader truncated
		// to the divergence point (uleRecovery): MIRRORING again only once no replica
		// holds a longer log, so no follower keeps a record the source no longer has
		if r.replicasWait(p, true, true) != "" {
			p.mu.Unlock()
			return replicaRecheck
		}
		p.setState(mirrorproto.StateMirroring, "")
	case mirrorproto.StateFailed:
		maxA := r.m.config().RetryMaxAttempts
		if p.st.RetryAttempt < 0 || maxA == 0 || p.st.RetryAttempt >= maxA {
			p.mu.Unlock()
			return 0
		}
		if d := time.Until(p.nextRetry); d > 0 {
			p.mu.Unlock()
			return d
		}
		p.st.RetryAttempt++
		p.setState(mirrorproto.StateLogAlignment, p.st.LastError)
	}
	aligning := p.st.State == mirrorproto.StateLogAlignment
	p.mu.Unlock()
	if aligning {
		return r.align(p, unclean)
	}
	return 0
}

// replicaRecheck is how often a LOG_ALIGNMENT that waits for its replicas looks again
// when no notification came (the replica listener wakes the runner at every follower
// fetch, ISR change and leadership change).
const replicaRecheck = time.Second

// replicasWait returns why the partition's replicas hold LOG_ALIGNMENT back (phase 1, or
// phase 2 with leos: cluster.md §3), "" when they do not. While it waits, every follower
// fetch, ISR change and leadership change of the partition wakes the runner; each new
// reason is logged once. mu held.
func (r *mirrorRT) replicasWait(p *partition, all, leos bool) string {
	why := p.part.MirrorAlignmentWait(all, leos)
	if why == "" {
		p.part.SetReplicaListener(nil)
		return ""
	}
	p.part.SetReplicaListener(r.kick)
	if why != p.waitWhy {
		p.waitWhy = why
		p.m.log.Info("mirror partition LOG_ALIGNMENT waits for its replicas", "mirror", r.name, "partition", p.String(), "reason", why)
	}
	return why
}

// finishAlignment is phase 2 of LOG_ALIGNMENT once the leader's own steps are done: when
// no ISR member or caught-up replica holds a log past the leader's (every replica with
// all), the log is aligned and the partition MIRRORING. It returns when to look again.
// mu held.
func (r *mirrorRT) finishAlignment(p *partition, all bool) time.Duration {
	if r.replicasWait(p, all, true) != "" {
		return replicaRecheck
	}
	p.st.Aligned = true
	p.setState(mirrorproto.StateMirroring, "")
	return time.Millisecond
}

// align runs LOG_ALIGNMENT (spec sections 4 and 5, cluster.md §3): phase 1, the wait for
// min.insync.replicas in the ISR (every replica with all:
// mirror.support.unclean.leader.election); the loop check and the failback lookup on the
// source, the truncation of an untrusted local log, the start position of a new
// partition; phase 2, the wait until no replica that counts holds a longer log (followers
// truncate by DivergingEpoch at the epoch the truncation raised); then MIRRORING. Network
// calls happen without the partition lock. It returns when to look again.
func (r *mirrorRT) align(p *partition, all bool) time.Duration {
	p.mu.Lock()
	l, err := p.getLog()
	if err != nil {
		p.fail("open local log: "+err.Error(), false)
		p.mu.Unlock()
		return time.Millisecond
	}
	if p.leaderAligned {
		d := r.finishAlignment(p, all)
		p.mu.Unlock()
		return d
	}
	// an untrusted log is held from here until its truncation: a follower that catches
	// up while phase 1 waits (the ISR reaching min.insync.replicas) must not move the HW
	// over records the truncation drops (setState holds it from the state change on; this
	// takes it again for a leader whose role or epoch changed meanwhile)
	p.syncHWHold()
	if r.replicasWait(p, all, false) != "" {
		p.mu.Unlock()
		return replicaRecheck
	}
	aligned, leo, logStart := p.st.Aligned, l.LogEndOffset(), l.LogStartOffset()
	ownLME, ownLMO := p.st.LastMirrorEpoch, p.st.LastMirrorOffset
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.requestTimeout)
	defer cancel()
	ourCID := r.m.local.ClusterID()
	resp, err := r.src.describeMirrors(ctx, ourCID, []mirrorproto.DescribeClusterMirrorsLookup{{TopicID: p.topicID, Partitions: []int32{p.index}}})
	oneWay := errors.Is(err, errNoMirrorSupport)
	lookupErr := err
	if err != nil && !oneWay {
		p.mu.Lock()
		p.fail("LOG_ALIGNMENT lookup on the source: "+err.Error(), false)
		p.mu.Unlock()
		return time.Millisecond
	}
	lme, lmo := int32(-1), int64(-1)
	if resp != nil {
		for _, sm := range resp.Mirrors {
			if sm.ErrorCode != 0 || sm.SourceClusterID != ourCID {
				continue
			}
			for _, st := range sm.Topics {
				if st.TopicName != p.topic && st.TopicID != p.topicID {
					continue
				}
				for _, sp := range st.Partitions {
					if sp.PartitionIndex == p.index && sp.State != mirrorproto.StateStopped {
						p.failNonRetryable(fmt.Sprintf("Mirror loop: the source mirrors %s from this cluster (mirror %s, state %s).",
							p.String(), sm.MirrorName, sp.State))
						return time.Millisecond
					}
				}
			}
		}
		for _, lr := range resp.LookupResults {
			if lr.TopicID != p.topicID {
				continue
			}
			for _, lp := range lr.Partitions {
				if lp.PartitionIndex == p.index {
					lme, lmo = lp.LastMirrorEpoch, lp.LastMirrorOffset
				}
			}
		}
	}
	// the start position of a new, empty mirror partition (spec sections 11, 16)
	startAt := int64(-1)
	if !aligned && leo == logStart {
		var so int64
		var err error
		switch r.cfg.startOffset {
		case "earliest":
			so, err = r.src.listOffset(ctx, p.topic, p.index, listEarliest)
		case "latest":
			if leo == 0 {
				so, err = r.src.listOffset(ctx, p.topic, p.index, listLatest)
				if err == nil {
					p.sourceHW.Store(so) // the mirror log starts at the source end: lag 0
				}
			}
		case "timestamp":
			if leo == 0 {
				so, err = r.src.listOffset(ctx, p.topic, p.index, r.cfg.startTimeMs)
				if err == nil && so < 0 {
					so, err = r.src.listOffset(ctx, p.topic, p.index, listLatest)
					if err == nil {
						p.sourceHW.Store(so)
					}
				}
			}
		}
		if err != nil {
			p.mu.Lock()
			p.fail("LOG_ALIGNMENT start offset on the source: "+err.Error(), false)
			p.mu.Unlock()
			return time.Millisecond
		}
		if so > leo {
			startAt = so
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st.State != mirrorproto.StateLogAlignment || l.LogEndOffset() != leo {
		return time.Millisecond // stopped or changed meanwhile; the next tick looks again
	}
	if !aligned && leo > logStart {
		// The local log may hold records the source never had (failback, or a local
		// topic started as a mirror topic): keep only the shared history.
		target := int64(0)
		why := "no last mirror position on the source: local data cannot be trusted"
		switch {
		case lme >= 0 && lmo >= 0 && !(ownLMO >= 0 && ownLME > lme):
			target = failbackTarget(l, lme, lmo)
			why = fmt.Sprintf("failback to the last mirror position (epoch %d, offset %d)", lme, lmo)
		case ownLMO >= 0:
			// Restarted after this cluster's own failover from this source: the log up
			// to the position this mirror recorded then is the source's history (a later
			// divergence of the source comes back as DivergingEpoch on the first fetch).
			// Also when the source recorded a position too, but an older one: every
			// failover raises the epoch, so the higher last mirror epoch is the later
			// failover — after a switchover and back, this cluster's own stop while
			// following the source, not the source's earlier stop while following us.
			target = failbackTarget(l, ownLME, ownLMO)
			why = fmt.Sprintf("restarted after this cluster's failover: back to the last mirror position it recorded (epoch %d, offset %d)", ownLME, ownLMO)
		case oneWay:
			why = "the source cannot answer the failback lookup (one-way mirroring)"
			r.m.log.Warn("mirror: one-way mirroring, truncating the local log to 0", "mirror", r.name, "partition", p.String(), "reason", lookupErr)
		}
		if err := p.truncateTo(l, target, why); err != nil {
			p.fail("LOG_ALIGNMENT truncation: "+err.Error(), false)
			return time.Millisecond
		}
	}
	if startAt > 0 {
		if err := p.truncateLog(startAt); err != nil {
			p.fail("LOG_ALIGNMENT start offset: "+err.Error(), false)
			return time.Millisecond
		}
	}
	// the leader's log is aligned: the HW may move again, up to the truncation point (the
	// truncation brought it there at most, and the followers past it count as unknown)
	p.leaderAligned = true
	p.syncHWHold()
	// step 4: the ISR truncates too. The registration takes the epoch the truncation
	// raised (followers fetching at the old one are fenced, then sent to the truncation
	// point by DivergingEpoch), and the alignment ends once no replica that counts holds
	// a longer log. Aligned is recorded only then: a new leader elected before it
	// truncates again, as its log may still hold the tail.
	p.catchUpEpoch()
	return r.finishAlignment(p, all)
}

// failbackTarget is the smaller of our end offset of epoch lme and lmo (spec section 4:
// the epoch alone is not enough).
func failbackTarget(l *storage.Log, lme int32, lmo int64) int64 {
	target := lmo
	ep, end := l.EndOffsetForEpoch(lme)
	switch {
	case ep >= 0 && end >= 0:
		target = min(target, end)
	case lme > l.LatestEpoch():
		// every local record is older than lme: the whole log is shared history up to lmo
	default:
		target = 0
	}
	return min(target, l.LogEndOffset())
}

// assign hands MIRRORING partitions with a known source leader to their fetchers.
func (r *mirrorRT) assign(parts []*partition) {
	n := r.m.config().NumReplicaFetchers
	want := map[fetcherKey][]*partition{}
	for _, p := range parts {
		leader := p.leader.Load()
		if p.state() != mirrorproto.StateMirroring || leader < 0 {
			continue
		}
		h := fnv.New32a()
		fmt.Fprintf(h, "%s-%d", p.topic, p.index)
		k := fetcherKey{broker: leader, idx: int(h.Sum32() % uint32(n))}
		want[k] = append(want[k], p)
	}
	for k, f := range r.fetchers {
		if _, ok := want[k]; !ok {
			f.stop() // its partitions moved (source leader, mirror.num.replica.fetchers) or left
			delete(r.fetchers, k)
		}
	}
	for k, ps := range want {
		f := r.fetchers[k]
		if f == nil {
			f = newFetcher(r, k)
			r.fetchers[k] = f
		}
		f.set(ps)
	}
	r.nFetchers.Store(int32(len(r.fetchers)))
}

func isInternal(topic string) bool { return len(topic) >= 2 && topic[:2] == "__" }

func topicIDString(id metadata.TopicID) string { return metadata.TopicIDString(id) }
