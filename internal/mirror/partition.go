package mirror

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	replica "github.com/kmirror/kmirror/internal/partition"
	"github.com/kmirror/kmirror/internal/record"
	"github.com/kmirror/kmirror/internal/storage"
)

// epochRaiseMargin is how far above an epoch every raise goes, and epochRaiseWithin how
// close a mirrored batch epoch may come to a raised local epoch before the next raise
// (spec section 6: "within 3", "+10").
const (
	epochRaiseMargin = 10
	epochRaiseWithin = 3
)

// partition is the runtime of one mirror partition: its persisted state and the live
// facts (source HW, counters). mu serialises state changes and every log mutation done by
// the mirror (fetch appends, truncation, failover); it is never held across a network
// call.
type partition struct {
	m       *Manager
	mirror  string
	topic   string
	topicID metadata.TopicID
	index   int32

	mu        sync.Mutex
	st        *stateRecord
	part      *replica.Partition // the local partition this broker leads, every write goes through it
	nextRetry time.Time
	raiseTo   int32 // a scheduled EPOCH_FENCING raise, 0 = none
	fetchErrs int   // consecutive connection-level fetch errors
	// unreachableSince: the first of the consecutive fetches that found the source
	// broker unreachable (zero: the last fetch reached it); see unreachableGrace
	unreachableSince time.Time
	// lfe is the epoch of the last batch in the log (the fetch's LastFetchedEpoch),
	// valid while lfeOK and the LEO is lfeAt; truncations clear lfeOK.
	lfe   int32
	lfeAt int64
	lfeOK bool
	// the OffsetForLeaderEpoch truncation check of sources without Fetch v12
	// (epochcheck.go): done against source broker epochCheckBroker at source leader epoch
	// epochCheckEpoch while epochChecked; NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH
	// clear it
	epochChecked     bool
	epochCheckBroker int32
	epochCheckEpoch  int32
	// byName: the source topic had no topic ID when the mirror started (Apache Kafka
	// before 2.8), so it is fetched by name even once the source has IDs
	byName bool
	// leaderAligned: LOG_ALIGNMENT's own steps are done on this leader (lookups,
	// truncation, start offset); it waits for its replicas (phase 2 of cluster.md §3).
	// Cleared by every state change. waitWhy is the last reason logged for the wait.
	leaderAligned bool
	waitWhy       string
	// holdMu makes syncHWHold, reassertHWHold and dropHWHold atomic to each other;
	// dropped (under holdMu): the manager dropped the runtime, which holds the HW no
	// more; holding (under holdMu): syncHWHold's last decision, once decided
	holdMu  sync.Mutex
	dropped bool
	decided bool
	holding bool

	cur      atomic.Int32 // st.State, readable without mu (CheckWrite)
	sourceHW atomic.Int64 // source HW from the latest fetch response (or start.offset=latest lookup), −1 unknown
	leader   atomic.Int32 // source leader broker ID, −1 unknown
	// srcLeaderEpoch is the source partition's leader epoch from the last source Metadata
	// (v7+), −1 unknown: a change asks for the truncation check of epochcheck.go
	srcLeaderEpoch atomic.Int32
	// throttled: the topic's mirror.replication.throttled.replicas lists this partition
	// on this broker, so its fetched bytes count against mirror.replication.throttled.rate
	throttled atomic.Bool
	// uncleanOptIn: the topic has mirror.support.unclean.leader.election=true, so a
	// truncation the source's history forces goes through ULE_RECOVERY (uleRecovery)
	uncleanOptIn atomic.Bool
	// fetchBytes is the PartitionMaxBytes of the next fetch (0: fetch.max.bytes); see
	// partitionMaxBytes and sizeFetch
	fetchBytes atomic.Int32

	bytesFetched    atomic.Int64
	bytesAppended   atomic.Int64
	batchesAppended atomic.Int64
	recordsAppended atomic.Int64 // record counts of the appended batches' headers
	newestTs        atomic.Int64 // max timestamp (ms) of the newest appended batch, −1 none yet
}

func (p *partition) key() stateKey {
	return stateKey{Mirror: p.mirror, TopicID: p.topicID, Partition: p.index}
}

func (p *partition) String() string { return fmt.Sprintf("%s-%d", p.topic, p.index) }

func (p *partition) state() mirrorproto.State { return mirrorproto.State(p.cur.Load()) }

// getLog returns the local log, for reads. mu held.
func (p *partition) getLog() (*storage.Log, error) {
	part, err := p.getPart()
	if err != nil {
		return nil, err
	}
	return part.Log(), nil
}

// getPart returns the local partition (this broker leads it), for writes. mu held.
func (p *partition) getPart() (*replica.Partition, error) {
	if p.part != nil {
		return p.part, nil
	}
	part, err := p.m.local.Partition(p.topic, p.index)
	if err != nil {
		return nil, err
	}
	p.part = part
	return part, nil
}

// retired reports whether this broker stopped leading the partition since the runtime
// took it: its fetcher and pending writes go (cluster.md §3). mu held.
func (p *partition) retired() bool { return p.part != nil && !p.part.IsLeader() }

// bumpEpoch has the controller raise the partition's leader epoch to at least epoch
// (spec section 6: raises are leader-epoch bumps by the controller). mu held: the bump is
// one round trip to the active controller.
func (p *partition) bumpEpoch(epoch int32) error {
	ctx, cancel := context.WithTimeout(p.m.ctx, 30*time.Second)
	defer cancel()
	return p.m.local.BumpLeaderEpoch(ctx, p.topic, p.index, epoch)
}

// setState moves to state to (spec section 4 table), bumping the state epoch and
// persisting the record. A refused transition is logged and ignored. mu held.
func (p *partition) setState(to mirrorproto.State, lastErr string) bool {
	from := p.st.State
	if !transitionAllowed(from, to) {
		p.m.log.Error("refused mirror partition state transition", "mirror", p.mirror, "partition", p.String(),
			"from", from.String(), "to", to.String())
		return false
	}
	p.leaderAligned, p.waitWhy = false, ""
	if p.part != nil {
		p.part.SetReplicaListener(nil)
	}
	p.st.PrevState = from
	p.st.State = to
	p.st.StateEpoch++
	p.st.LastError = lastErr
	if p.part != nil {
		p.st.LeaderEpoch = p.part.LeaderEpoch()
	}
	p.cur.Store(int32(to))
	p.syncHWHold()
	p.persist()
	if from != to {
		p.m.log.Info("mirror partition state", "mirror", p.mirror, "partition", p.String(),
			"from", from.String(), "to", to.String(), "error", lastErr)
	}
	return true
}

// syncHWHold holds the HW of the local log (partition HoldHighWatermark) while
// LOG_ALIGNMENT has not yet truncated an untrusted log — one not aligned since it last
// stopped mirroring (failback, re-attach, a new mirror over local data), whose records
// past the truncation point must never become readable, also not when the ISR grows
// during the wait for it (cluster.md §3) — or while the runtime is about to enter that
// LOG_ALIGNMENT (UNKNOWN: a runtime that took over the partition; STOPPED with the
// failback asked for), and releases it in every other case: the leader's own alignment
// done, an aligned log, any other state, a runtime the manager dropped. Followers take
// the leader's HW, so the hold holds every replica. A new leader of a mirror partition
// starts held (Manager.HoldOnLead); the first syncHWHold of its runtime, at takeOver,
// decides. mu held.
func (p *partition) syncHWHold() {
	part, err := p.getPart()
	if err != nil {
		return
	}
	p.holdMu.Lock()
	defer p.holdMu.Unlock()
	if p.dropped {
		// dropHWHold released what this runtime held; a hold there now belongs to a
		// later leadership (HoldOnLead) and its runtime
		return
	}
	l := part.Log()
	hold := p.aligningUntrusted() && !p.st.Aligned && l.LogEndOffset() > l.LogStartOffset()
	p.decided, p.holding = true, hold
	part.HoldHighWatermark(hold)
}

// aligningUntrusted reports whether the runtime is in LOG_ALIGNMENT before the leader's
// own alignment, or will enter it on its next drive (UNKNOWN or STOPPED while the topic
// is not desired stopped: a runtime that took over, a failback). mu held.
func (p *partition) aligningUntrusted() bool {
	switch p.st.State {
	case mirrorproto.StateLogAlignment:
		return !p.leaderAligned
	case mirrorproto.StateUnknown, mirrorproto.StateStopped:
		return p.alignsNext()
	}
	return false
}

// alignsNext reports whether the topic of an UNKNOWN or STOPPED partition is desired
// mirroring or paused: its next drive enters LOG_ALIGNMENT.
func (p *partition) alignsNext() bool {
	t := p.m.local.Metadata().Image().Topics[p.topic]
	return t != nil && t.ID == p.topicID && t.Mirror != nil && t.Mirror.Desired != metadata.DesiredStopped
}

// reassertHWHold applies syncHWHold's last decision again, for a runtime the manager
// keeps (every reconcile): a leadership lost and back before the manager dropped the
// runtime leaves the partition with the hold a new leader starts with
// (Manager.HoldOnLead), or none. A STOPPED partition decides anew, as its desired state
// is what changed: held from the failback's request on (its log is untrusted: a failover
// clears aligned), released when it is taken back. mu not needed; the partition is asked
// only while this broker leads it.
func (p *partition) reassertHWHold() {
	p.holdMu.Lock()
	defer p.holdMu.Unlock()
	if p.dropped || !p.decided || !p.m.local.Leads(p.topic, p.index) {
		return
	}
	part, err := p.m.local.Partition(p.topic, p.index)
	if err != nil {
		return
	}
	if p.state() == mirrorproto.StateStopped {
		l := part.Log()
		p.holding = p.alignsNext() && l.LogEndOffset() > l.LogStartOffset()
	}
	part.HoldHighWatermark(p.holding)
}

// dropHWHold releases the HW hold of a runtime the manager dropped while this broker may
// still lead the partition (the mirror deleted, the topic detached or replaced) and keeps
// it from holding again (a drive still running). It does not wait for a leadership, and
// leaves a hold the partition took on becoming leader since (Partition.ReleaseOwnedHold):
// that one is the next runtime's to decide, or goes by HoldOnLead. mu not needed.
func (p *partition) dropHWHold() {
	p.holdMu.Lock()
	defer p.holdMu.Unlock()
	p.dropped = true
	if !p.m.local.Leads(p.topic, p.index) {
		return // not leading: no hold to release (losing the leadership dropped it)
	}
	if part, err := p.m.local.Partition(p.topic, p.index); err == nil {
		part.ReleaseOwnedHold()
	}
}

// persist writes the state record to __mirror_state. mu held. A runtime whose broker no
// longer leads the partition writes nothing: the new leader continues from the persisted
// state (cluster.md §3), and a late write of the old one (a fetch answer that failed on
// the lost leadership) must not replace it.
func (p *partition) persist() {
	if p.retired() {
		return
	}
	if err := p.m.store.write(p.key(), p.st); err != nil {
		p.m.log.Error("persist mirror partition state", "mirror", p.mirror, "partition", p.String(), "err", err)
	}
}

// fail moves the partition to FAILED (spec section 4): nonRetryable sets RetryAttempt −1,
// otherwise the next retry is scheduled with exponential backoff and full jitter. mu
// held.
func (p *partition) fail(msg string, nonRetryable bool) {
	if p.st.State == mirrorproto.StateStopping || p.st.State == mirrorproto.StateStopped {
		return // a failover in progress or done wins
	}
	if p.retired() {
		p.m.log.Debug("mirror partition: an error after losing the leadership is not recorded", "mirror", p.mirror, "partition", p.String(), "error", msg)
		return
	}
	if p.m.ctx.Err() != nil {
		// the manager closes (the broker shuts down) and canceled the call: the state
		// stays as it was for the next leader (a LOG_ALIGNMENT stays one: its log stays
		// untrusted, its HW held)
		p.m.log.Debug("mirror partition: an error while the manager closes is not recorded", "mirror", p.mirror, "partition", p.String(), "error", msg)
		return
	}
	if nonRetryable {
		p.st.RetryAttempt = mirrorproto.RetryAttemptNonRetryable
	} else if p.st.RetryAttempt < 0 {
		p.st.RetryAttempt = 0
	}
	p.nextRetry = time.Now().Add(p.m.backoff(p.st.RetryAttempt))
	p.m.log.Warn("mirror partition failed", "mirror", p.mirror, "partition", p.String(), "error", msg,
		"retryAttempt", p.st.RetryAttempt)
	p.setState(mirrorproto.StateFailed, msg)
}

// backoff returns the full-jitter exponential backoff before retry attempt n+1.
func (m *Manager) backoff(n int32) time.Duration {
	cfg := m.config()
	ceil := cfg.RetryInitialBackoffMs
	for i := int32(0); i < n && ceil < cfg.RetryMaxBackoffMs; i++ {
		ceil *= 2
	}
	ceil = min(ceil, cfg.RetryMaxBackoffMs)
	return time.Duration(rand.Int64N(ceil+1)) * time.Millisecond
}

// truncateTo truncates the local log to target for LOG_ALIGNMENT or a source
// truncation, recording the report (spec section 15), and raises the leader epoch by one
// at the new LEO, atomically for readers (storage TruncateToFenced): consumers that read
// the dropped tail then get FENCED_LEADER_EPOCH, look their position up with
// OffsetForLeaderEpoch and move to the divergence point (spec section 16, truncation
// before exposure), as after a Kafka leader change, instead of OFFSET_OUT_OF_RANGE and
// auto.offset.reset (or, once the log has grown back past their position, silently
// skipping the records now in the gap). mu held.
func (p *partition) truncateTo(l *storage.Log, target int64, why string) error {
	leo := l.LogEndOffset()
	if target >= leo {
		return nil
	}
	p.lfeOK = false
	if err := p.part.TruncateToFenced(target); err != nil {
		return err
	}
	p.st.TruncatedOffset = target
	p.st.TruncatedRecords = leo - l.LogEndOffset()
	p.m.log.Warn("mirror partition truncated", "mirror", p.mirror, "partition", p.String(),
		"reason", why, "truncatedTo", target, "recordsDropped", p.st.TruncatedRecords)
	return nil
}

// truncateLog empties the local log and restarts it at offset (TruncateFullyAndStartAt,
// which keeps the leader epoch, spec sections 6 and 16): the jumps to the source log
// start, to start.offset and past a first batch straddling the log start (truncateTo is
// the other way, for dropped tails). It also forgets the cached LastFetchedEpoch. mu
// held.
func (p *partition) truncateLog(offset int64) error {
	p.lfeOK = false
	return p.part.TruncateFullyAndStartAt(offset)
}

// lastFetchedEpoch is the Fetch LastFetchedEpoch for the log: the leader epoch of the
// last batch in it, −1 when the log holds no batch (Kafka's follower sends the epoch of
// the last batch it appended). It is read from the log, not taken from the cache: a data
// directory written before leader-epoch-fences existed holds epochs raised without
// records (failover, EPOCH_FENCING) as cache entries, and a Kafka source answers such an
// epoch with OFFSET_OUT_OF_RANGE or DivergingEpoch on every fetch. mu held.
func (p *partition) lastFetchedEpoch(l *storage.Log) int32 {
	leo := l.LogEndOffset()
	if p.lfeOK && p.lfeAt == leo {
		return p.lfe
	}
	p.lfe, p.lfeAt, p.lfeOK = lastBatchEpoch(l), leo, true
	return p.lfe
}

// lastBatchEpoch reads the leader epoch of the batch holding LEO−1 from the log; −1 when
// the log is empty or the read fails.
func lastBatchEpoch(l *storage.Log) int32 {
	leo := l.LogEndOffset()
	if leo <= l.LogStartOffset() {
		return -1
	}
	data, err := l.Read(leo-1, record.HeaderSize, leo, true)
	if err != nil || len(data) == 0 {
		return -1
	}
	b, _, err := record.Next(data)
	if err != nil {
		return -1
	}
	return b.LeaderEpoch()
}

// skipTo jumps an empty-or-behind log to the source log start (spec section 16: silent
// loss is never silent). mu held.
func (p *partition) skipTo(l *storage.Log, sourceStart int64) error {
	leo := l.LogEndOffset()
	if sourceStart <= leo {
		return nil
	}
	if err := p.truncateLog(sourceStart); err != nil {
		return err
	}
	skipped := sourceStart - leo
	if leo > 0 || l.LogStartOffset() > 0 {
		p.st.SkippedOffsets += skipped
		p.m.log.Warn("mirror partition skipped offsets: the source log start passed the mirror position",
			"mirror", p.mirror, "partition", p.String(), "from", leo, "to", sourceStart, "skipped", skipped)
		p.persist()
	}
	return nil
}

// fetchResult is what a fetcher learned for one partition.
type fetchResult struct {
	fetchOffset int64
	resp        *kmsg.FetchResponseTopicPartition
	// sourceStart and sourceEnd are the source's log start and end, looked up after
	// OFFSET_OUT_OF_RANGE (−1 unknown).
	sourceStart, sourceEnd int64
}

// errCorruptBatch marks a malformed mirrored batch.
var errCorruptBatch = errors.New("corrupt record batch from the source")

// applyFetch appends one partition's fetch response (spec section 3). It returns true
// when the partition needs the source metadata refreshed (leader moved, topic unknown).
func (p *partition) applyFetch(fr fetchResult) (needMeta bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st.State != mirrorproto.StateMirroring || p.retired() {
		return false
	}
	l, err := p.getLog()
	if err != nil {
		p.fail("open local log: "+err.Error(), false)
		return false
	}
	if l.LogEndOffset() != fr.fetchOffset {
		return false // truncated or appended meanwhile: stale response
	}
	p.fetchErrs, p.unreachableSince = 0, time.Time{}
	resp := fr.resp
	switch resp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		return p.outOfRange(l, fr)
	case kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code:
		p.epochChecked = false // a source leader change: check for truncation before fetching (sources without Fetch v12)
		return true
	case kerr.LeaderNotAvailable.Code, kerr.UnknownLeaderEpoch.Code, kerr.ReplicaNotAvailable.Code, kerr.KafkaStorageError.Code,
		kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code, kerr.InconsistentTopicID.Code,
		kerr.NotCoordinator.Code, kerr.RequestTimedOut.Code:
		return true
	default:
		p.fail(fmt.Sprintf("fetch from the source: %v", kerr.ErrorForCode(resp.ErrorCode)), false)
		return false
	}
	if p.st.RetryAttempt > 0 {
		// a successful fetch, with data or not: the source is back, and the next failure
		// starts from retry 0 and the initial backoff
		p.st.RetryAttempt = 0
		p.persist()
	}
	if resp.HighWatermark >= 0 {
		p.sourceHW.Store(resp.HighWatermark)
	}
	if de := resp.DivergingEpoch; de.Epoch >= 0 && de.EndOffset >= 0 {
		target := de.EndOffset
		if ep, end := l.EndOffsetForEpoch(de.Epoch); ep >= 0 && end >= 0 && end < target {
			target = end
		}
		_ = p.truncateSourceDiverged(l, target, fmt.Sprintf("source diverged at epoch %d end offset %d", de.Epoch, de.EndOffset))
		return false
	}
	if resp.LogStartOffset > l.LogEndOffset() {
		if err := p.skipTo(l, resp.LogStartOffset); err != nil {
			p.fail("jump to the source log start: "+err.Error(), false)
		}
		return false
	}
	if err := p.appendBatches(l, resp.RecordBatches); err != nil {
		p.fail(err.Error(), false)
		return false
	}
	if resp.LogStartOffset > l.LogStartOffset() && resp.LogStartOffset <= l.LogEndOffset() {
		if err := p.part.AdvanceLogStartOffset(resp.LogStartOffset); err != nil {
			p.m.log.Warn("advance mirror log start", "partition", p.String(), "err", err)
		}
	}
	return false
}

// appendBatches checks every whole batch (length, magic 2, CRC-32C, base offset ≥ LEO),
// cuts a partial last batch off and appends the rest unchanged with follower semantics.
// Records are never decoded. mu held.
func (p *partition) appendBatches(l *storage.Log, data []byte) error {
	p.bytesFetched.Add(int64(len(data)))
	leo := l.LogEndOffset()
	var start, end int // data[start:end] is appended
	lastEpoch := int32(-1)
	var advanceTo int64 = -1
	var records int64
	newestTs := int64(-1)
	latest := p.part.LeaderEpoch()
	pos := 0
	for pos < len(data) {
		b, _, err := record.Next(data[pos:])
		if errors.Is(err, record.ErrTruncate) {
			break // partial last batch: fetched again next time
		}
		if err != nil {
			return fmt.Errorf("%w at byte %d of the fetch at offset %d: %v", errCorruptBatch, pos, leo, err)
		}
		if err := b.Check(); err != nil {
			return fmt.Errorf("%w at offset %d: %v", errCorruptBatch, b.BaseOffset(), err)
		}
		size := b.Size()
		switch {
		case b.NextOffset() <= leo && end == start:
			// wholly below the LEO: already here
			pos += size
			start, end = pos, pos
			continue
		case b.BaseOffset() < leo && end == start:
			// the first batch straddles the LEO: only allowed on an empty log (a log
			// start inside a batch, Kafka's UnexpectedAppendOffsetException handling)
			if leo != l.LogStartOffset() {
				return fmt.Errorf("%w: batch %d..%d straddles the log end offset %d", errCorruptBatch, b.BaseOffset(), b.LastOffset(), leo)
			}
			if err := p.truncateLog(b.BaseOffset()); err != nil {
				return err
			}
			advanceTo = leo
		case b.BaseOffset() < leo:
			return fmt.Errorf("%w: batch base offset %d below the expected %d", errCorruptBatch, b.BaseOffset(), leo)
		}
		// spec section 6: a batch epoch above the local leader epoch is not appended
		// before the partition went through EPOCH_FENCING, which raises the leader epoch
		// through the controller (the fetched bytes are kept meanwhile); one within 3 of
		// it schedules a raise while appending goes on
		e := b.LeaderEpoch()
		if e > latest {
			if err := p.fenceEpoch(e + epochRaiseMargin); err != nil {
				return fmt.Errorf("EPOCH_FENCING for a source batch of leader epoch %d: %w", e, err)
			}
			latest = p.part.LeaderEpoch()
		} else if latest-e <= epochRaiseWithin {
			p.raiseTo = max(p.raiseTo, e+epochRaiseMargin)
		}
		leo = b.NextOffset()
		lastEpoch = b.LeaderEpoch()
		records += int64(b.RecordCount())
		newestTs = b.MaxTimestamp()
		pos += size
		end = pos
	}
	if end > start {
		// every batch was CRC-checked above (before any straddle truncation): once only
		if _, err := p.part.AppendMirrored(data[start:end]); err != nil {
			return fmt.Errorf("append mirrored batches: %w", err)
		}
		p.lfe, p.lfeAt, p.lfeOK = lastEpoch, l.LogEndOffset(), true
		p.bytesAppended.Add(int64(end - start))
		p.batchesAppended.Add(1)
		p.recordsAppended.Add(records)
		p.newestTs.Store(newestTs)
	}
	if advanceTo > 0 {
		if err := p.part.AdvanceLogStartOffset(advanceTo); err != nil {
			return err
		}
	}
	return nil
}

// outOfRange handles OFFSET_OUT_OF_RANGE (spec section 3): below the source log start →
// restart at it (reported as skipped); above the source end → the source lost data:
// truncate to its end. mu held.
func (p *partition) outOfRange(l *storage.Log, fr fetchResult) bool {
	leo := l.LogEndOffset()
	switch {
	case fr.sourceStart >= 0 && leo < fr.sourceStart:
		if err := p.skipTo(l, fr.sourceStart); err != nil {
			p.fail("jump to the source log start: "+err.Error(), false)
		}
	case fr.sourceEnd >= 0 && leo > fr.sourceEnd:
		p.uleRecovery()
		if err := p.truncateTo(l, fr.sourceEnd, "the source log ends below the mirror position"); err != nil {
			p.fail("truncate to the source log end: "+err.Error(), false)
		}
		p.persist()
	default:
		return true
	}
	return false
}

// catchUpEpoch has the controller bump the partition's registered leader epoch to the
// log's when a truncation fence raised it locally (TruncateToFenced), so that every
// broker's metadata gives clients the epoch the leader fences with. mu held.
func (p *partition) catchUpEpoch() {
	part := p.part
	if part == nil {
		return
	}
	if reg := part.Registration(); reg != nil && reg.LeaderEpoch < part.LeaderEpoch() {
		if err := p.bumpEpoch(part.LeaderEpoch()); err != nil {
			p.m.log.Warn("mirror partition: the controller did not take the leader epoch of a truncation", "partition", p.String(), "err", err)
		}
	}
}

// maybeRaiseEpoch runs EPOCH_FENCING when a raise is scheduled (spec section 6). mu
// held.
func (p *partition) maybeRaiseEpoch() {
	if p.raiseTo == 0 || p.st.State != mirrorproto.StateMirroring {
		return
	}
	to := p.raiseTo
	p.raiseTo = 0
	part, err := p.getPart()
	if err != nil || to <= part.LeaderEpoch() {
		return
	}
	if err := p.fenceEpoch(to); err != nil {
		p.fail("raise the leader epoch: "+err.Error(), false)
	}
}

// noteSourceEpoch takes the source partition's current leader epoch from a Metadata
// refresh (spec section 6, "the periodic sync does the same"): when it is above the local
// leader epoch, a raise to it + epochRaiseMargin is scheduled, as for a mirrored batch
// epoch. So DLE ≥ SLE also when the source's leader epoch rises without new records
// (source leader changes on an idle partition), and a consumer whose committed offset
// carries the source's epoch never waits on the destination for metadata with that
// epoch. Unlike a batch epoch, one merely within epochRaiseWithin below schedules
// nothing: no append waits for it, and a raise at every mirror start (source and
// destination both at epoch 0) would drop the first fetch's answers. The raise runs in
// maybeRaiseEpoch, on the same runner tick.
func (p *partition) noteSourceEpoch(sle int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !activeState(p.st.State) || p.retired() {
		return
	}
	part, err := p.getPart()
	if err != nil {
		return
	}
	if sle > part.LeaderEpoch() {
		p.raiseTo = max(p.raiseTo, sle+epochRaiseMargin)
	}
}

// uleRecovery enters ULE_RECOVERY (spec section 4) before a MIRRORING partition of an
// opted-in topic (mirror.support.unclean.leader.election=true) truncates to where the
// source's history parts from its log: the source lost records it had acknowledged, which
// only an unclean leader election does to a log a mirror reads up to the source HW. The
// partition leaves its fetcher; the runner takes it back to MIRRORING once every replica
// truncated too (cluster.md §3's phase 2 with every replica). A topic not opted in
// truncates and goes on fetching, as Kafka's follower does. mu held.
func (p *partition) uleRecovery() {
	if p.uncleanOptIn.Load() && p.st.State == mirrorproto.StateMirroring {
		p.setState(mirrorproto.StateULERecovery, "")
	}
}

// fenceEpoch runs EPOCH_FENCING from MIRRORING: the controller raises the leader epoch to
// at least to, then the partition is MIRRORING again. mu held.
func (p *partition) fenceEpoch(to int32) error {
	p.setState(mirrorproto.StateEpochFencing, "")
	if err := p.bumpEpoch(to); err != nil {
		return err
	}
	p.setState(mirrorproto.StateMirroring, "")
	return nil
}

// failover runs the failover sequence of spec section 5 for this partition: remove the
// fetcher (the state change does it: fetchers append only in MIRRORING), persist the
// last mirror position, raise the epoch above every epoch in the log, abort every open
// transaction, append MIRROR_PID_RESET, then STOPPED. A partition that never mirrored
// goes to STOPPED as it is.
func (p *partition) failover(sourceClusterID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st.State == mirrorproto.StateStopped {
		return nil
	}
	l, err := p.getLog()
	if err != nil {
		return err
	}
	part := p.part
	if p.st.StateEpoch == 0 && l.LogEndOffset() == 0 {
		// never mirrored (a partition added to a STOPPED topic, or one stopped before its
		// first LOG_ALIGNMENT): no producer state or transaction to reset, so no marker —
		// an empty partition, as Kafka's CreatePartitions makes it. Its epoch is still
		// raised, so that its own writes never share an epoch with the source's batches
		// should it ever be re-attached (spec section 6).
		// (raised before any state change: a retry after a failed raise or a crash takes
		// this branch again)
		if err := p.bumpEpoch(epochRaiseMargin); err != nil {
			return fmt.Errorf("raise the leader epoch: %w", err)
		}
		p.setState(mirrorproto.StateStopping, "")
		p.setState(mirrorproto.StateStopped, "")
		return nil
	}
	if p.st.State != mirrorproto.StateStopping {
		if !p.setState(mirrorproto.StateStopping, "") {
			return fmt.Errorf("cannot stop from %s", p.st.State)
		}
		// step 2: the last mirror position — only from an aligned log: one stopped before
		// LOG_ALIGNMENT finished (FAILED or LOG_ALIGNMENT after a re-attach) still holds
		// this cluster's own writes, which a later failback or re-attach must not take for
		// the source's history; the previous position then stands
		if p.st.Aligned {
			p.st.LastMirrorEpoch = l.LatestEpoch()
			p.st.LastMirrorOffset = l.LogEndOffset()
			p.st.StopSourceHW = p.sourceHW.Load()
		} else {
			p.st.StopSourceHW = -1 // its lag would count this cluster's own writes
		}
		p.st.StopFrom, p.st.StopEpoch = l.LogEndOffset(), 0
		p.persist()
	} else if leo := l.LogEndOffset(); p.st.StopFrom > leo {
		// resumed by a new leader whose log lacks the end of the old one's (records above
		// the HW, not yet in this replica when the leadership moved): the position this
		// stop recorded is cut to what the partition now holds
		if p.st.LastMirrorOffset == p.st.StopFrom {
			p.st.LastMirrorEpoch, p.st.LastMirrorOffset = l.LatestEpoch(), leo
		}
		p.st.StopFrom = leo
		p.persist()
	}
	// step 3: an epoch no source batch ever carried, and above every epoch this log had:
	// a second failover after a re-attach must not stamp its writes with the first
	// one's epoch, which consumers of the first one's (truncated) writes still hold. Once
	// per failover: a resumed one (on this leader or a new one, whose epoch is above it
	// anyway) keeps it.
	if p.st.StopEpoch == 0 || part.LeaderEpoch() < p.st.StopEpoch {
		newEpoch := max(max(0, p.st.LastMirrorEpoch)+epochRaiseMargin, part.LeaderEpoch()+1)
		if err := p.bumpEpoch(newEpoch); err != nil {
			return fmt.Errorf("raise the leader epoch: %w", err)
		}
		p.st.StopEpoch = part.LeaderEpoch()
		p.persist()
	}
	newEpoch := part.LeaderEpoch()
	now := time.Now().UnixMilli()
	// the markers are written with acks=all (cluster.md §3): retried until the ISR has
	// them, a failover that times out or finds the ISR below min.insync.replicas is
	// resumed from STOPPING, writing only what the log does not hold yet
	ctx, cancel := context.WithTimeout(p.m.ctx, 30*time.Second)
	defer cancel()
	// step 4: abort what is still open in the mirrored data (an ABORT already written
	// closed its transaction: it is not listed again)
	for _, txn := range l.OpenTransactions() {
		marker := record.BuildEndTxnMarker(record.ControlAbort, txn.ProducerID, txn.ProducerEpoch, newEpoch, 0, now)
		if _, err := part.AppendControlAsLeader(ctx, marker); err != nil {
			return fmt.Errorf("abort open transaction of producer %d: %w", txn.ProducerID, err)
		}
	}
	// step 5: forget mirrored producer state
	done, err := hasPIDReset(l, p.st.StopFrom)
	if err != nil {
		return fmt.Errorf("look for this failover's MIRROR_PID_RESET: %w", err)
	}
	if !done {
		if _, err := part.AppendControlAsLeader(ctx, record.BuildMirrorPIDReset(sourceClusterID, newEpoch, now)); err != nil {
			return fmt.Errorf("append MIRROR_PID_RESET: %w", err)
		}
	}
	// every marker of this failover, also those of an earlier attempt, is in the ISR
	if err := part.WaitReplicated(ctx, newEpoch, l.LogEndOffset()); err != nil {
		return fmt.Errorf("wait for the ISR to hold the failover markers: %w", err)
	}
	p.st.Aligned = false
	p.st.RetryAttempt = 0
	p.st.StopFrom, p.st.StopEpoch = -1, 0
	p.setState(mirrorproto.StateStopped, "")
	return nil
}

// hasPIDReset reports whether the log holds a MIRROR_PID_RESET control batch at or
// after offset from (−1: none is looked for): a failover's own, written by an earlier
// attempt. Only batch headers and the first record key of control batches are read.
func hasPIDReset(l *storage.Log, from int64) (bool, error) {
	if from < 0 {
		return false, nil
	}
	leo := l.LogEndOffset()
	for off := max(from, l.LogStartOffset()); off < leo; {
		data, err := l.Read(off, 1<<20, leo, true)
		if err != nil {
			return false, err
		}
		it := record.IterBatches(data)
		moved := false
		for it.Next() {
			b := it.Batch()
			if b.NextOffset() <= off {
				continue
			}
			if b.IsControl() {
				if typ, err := b.ControlType(); err == nil && typ == record.ControlMirrorPIDReset {
					return true, nil
				}
			}
			off, moved = b.NextOffset(), true
		}
		if !moved {
			return false, nil
		}
	}
	return false, nil
}

// describe returns the describe view of the partition (spec sections 10 and 13).
func (p *partition) describe() mirrorproto.DescribeClusterMirrorsResponsePartition {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := mirrorproto.DescribeClusterMirrorsResponsePartition{
		PartitionIndex: p.index, SourceOffset: -1, DestinationOffset: -1, Lag: -1,
		State: p.st.State, RetryAttempt: p.st.RetryAttempt,
		LastMirrorEpoch: p.st.LastMirrorEpoch, LastMirrorOffset: p.st.LastMirrorOffset,
		TruncatedOffset: p.st.TruncatedOffset, TruncatedRecords: p.st.TruncatedRecords,
		SkippedOffsets: p.st.SkippedOffsets,
	}
	if p.st.State != mirrorproto.StateFailed {
		d.RetryAttempt = max(0, d.RetryAttempt)
	}
	if p.st.LastError != "" {
		msg := p.st.LastError
		d.ErrorMessage = &msg
	}
	if l, err := p.getLog(); err == nil {
		d.DestinationOffset = l.LogEndOffset()
	}
	hw := p.sourceHW.Load()
	if hw >= 0 {
		d.SourceOffset = hw
	}
	switch {
	case p.st.State == mirrorproto.StateStopped || p.st.State == mirrorproto.StateStopping:
		// what the failover left unmirrored: the source HW then against the LEO then
		// (before the markers and this cluster's own writes), from the state record, so
		// also after a restart
		if p.st.StopSourceHW >= 0 && p.st.LastMirrorOffset >= 0 {
			d.SourceOffset = p.st.StopSourceHW
			d.Lag = max(0, p.st.StopSourceHW-p.st.LastMirrorOffset)
		}
	case hw >= 0 && d.DestinationOffset >= 0:
		d.Lag = max(0, hw-d.DestinationOffset)
	}
	return d
}
