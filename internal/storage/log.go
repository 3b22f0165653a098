package storage

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/internal/record"
)

// AppendInfo describes an append (Kafka's LogAppendInfo). Offsets are inclusive;
// OffsetOfMaxTimestamp is the last offset of the batch holding MaxTimestamp (Kafka's
// shallow offset). Duplicate reports an idempotent retry answered with the original
// offsets, nothing appended.
type AppendInfo struct {
	FirstOffset, LastOffset int64
	MaxTimestamp            int64
	OffsetOfMaxTimestamp    int64
	Duplicate               bool
	LogStartOffset          int64
}

// Log is one partition's log (Apache Kafka's UnifiedLog + LocalLog). Appends,
// truncation, retention and high-watermark updates are serialised by a mutex; Read, the
// offset getters, FirstUnstableOffset and AbortedTransactions may run concurrently with
// them. docs/storage.md relates its offsets (log start, HW, LSO, LEO), the leader-epoch
// cache and the producer-state snapshots.
type Log struct {
	dir     string
	topicID [16]byte
	logger  *slog.Logger

	mu            sync.Mutex // appender: everything below except what rw or atomics guard
	cfg           Config
	ps            *producerState
	recoveryPoint int64
	lastFlush     time.Time
	// persistLogStart writes the log start offset to disk (the Manager's
	// log-start-offset-checkpoint); nil for a log opened without a Manager.
	persistLogStart func() error
	horizon         int64 // earliest delete horizon (ms) of a retained tombstone or marker, 0 when none

	// segsGen counts the changes to segs other than appends and rolls (truncations,
	// deletions): a cleaning pass planned at one generation swaps only at the same.
	segsGen uint64
	cleanMu sync.Mutex // one Clean pass at a time
	// cleanedTo is the first dirty offset: the cleaner's checkpoint (Kafka's
	// cleaner-offset-checkpoint), written by Clean and lowered by truncations.
	cleanedTo atomic.Int64

	rw   sync.RWMutex // segs against readers; written only with mu held
	segs []*segment

	logStart atomic.Int64
	leo      atomic.Int64
	hw       atomic.Int64 // high watermark: log start <= HW <= LEO; written only with mu held
	fuo      atomic.Int64 // first unstable offset, −1 when no transaction is unstable
	closed   atomic.Bool

	// Producer-state snapshots (snapshot.go), owned by the appender: the offsets of the
	// <offset>.snapshot files, sorted, those written without fsync, and encoding scratch.
	snaps         []int64
	unsyncedSnaps []int64
	snapBuf       []byte
	snapPIDs      []int64
	scanBuf       []byte // the buffer of the appender's scans (load, producer replays)

	health *dirHealth // the log directory's failure state (logdir.go)

	epochs *epochCache // leader-epoch cache: the epochs of the batches in the log
	fences *epochCache // epoch raises without records (RaiseLeaderEpoch, truncations)
	drops  *epochDrops // epochs whose batches a truncation dropped, and where

	chMu    sync.Mutex
	changed chan struct{}
}

// pending is one batch of an append and its byte position in the append's buffer.
type pending struct {
	b   record.Batch
	off int
}

// Open opens or creates the partition directory dir (…/<topic>-<partition>), recovers
// every segment (CRC-checked; a torn or corrupt tail is cut and logged at WARN) and
// rebuilds indexes, producer state, open transactions and the leader-epoch cache, as
// Kafka's LogLoader does after an unclean shutdown. With cfg.ExternalHighWatermark the
// high watermark starts at the log start offset.
func Open(dir string, topicID [16]byte, cfg Config, logger *slog.Logger) (*Log, error) {
	return openLog(dir, topicID, cfg, logger, -1, -1, -1)
}

// openLog opens the log trusting segments below recoveryPoint (−1 = recover all),
// starting the log no lower than logStart (−1 = the first segment's base offset) and,
// with an external high watermark, the HW at hw clamped to [log start, LEO] (−1 = the log
// start, as Kafka without a checkpoint entry).
func openLog(dir string, topicID [16]byte, cfg Config, logger *slog.Logger, recoveryPoint, logStart, hw int64) (*Log, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l := &Log{
		dir: dir, topicID: topicID, logger: logger.With("dir", dir),
		cfg: cfg.sanitize(), ps: newProducerState(),
		epochs: newEpochCache(dir, leaderEpochCheckpoint), fences: newEpochCache(dir, leaderEpochFences),
		drops:     newEpochDrops(dir),
		lastFlush: time.Now(),
	}
	l.fuo.Store(-1)
	// Until the load ends, the HW only tells which replayed transactions are replicated
	// (their marker below it): all of them with one replica, else those below the
	// checkpointed HW, as Kafka's reload followed by updateHighWatermark.
	l.hw.Store(math.MaxInt64)
	if l.cfg.ExternalHighWatermark {
		l.hw.Store(max(hw, 0))
	}
	if err := l.load(recoveryPoint, logStart, math.MaxInt64); err != nil {
		return nil, err
	}
	if !l.cfg.ExternalHighWatermark || hw < 0 {
		hw = l.leo.Load()
		if l.cfg.ExternalHighWatermark {
			hw = l.logStart.Load()
		}
	}
	l.setHighWatermarkLocked(min(max(hw, l.logStart.Load()), l.leo.Load()))
	return l, nil
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// SetConfig replaces the log's topic configs; they apply from the next append. Turning
// ExternalHighWatermark off moves the HW to the LEO at once; turning it on leaves the HW
// where it is for UpdateHighWatermark to move.
func (l *Log) SetConfig(cfg Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg.sanitize()
	if !l.cfg.ExternalHighWatermark && !l.closed.Load() && l.hw.Load() < l.leo.Load() {
		l.setHighWatermarkLocked(l.leo.Load())
		l.notify()
	}
}

// LogStartOffset is the first offset readable in the log.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset is the LEO: the offset the next appended record gets.
func (l *Log) LogEndOffset() int64 { return l.leo.Load() }

// Size is the byte size of all segments' .log files.
func (l *Log) Size() int64 {
	l.rw.RLock()
	defer l.rw.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size.Load()
	}
	return n
}

// Changed returns a channel closed at the next append, truncation, log start change,
// high-watermark advance or close, for fetch long polls and acks=all produces: take the
// channel, re-check, then wait on it.
func (l *Log) Changed() <-chan struct{} {
	l.chMu.Lock()
	defer l.chMu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// Wake closes the Changed channel without a change to the log: the partition's role or
// leader epoch changed, and waiters must re-check it.
func (l *Log) Wake() { l.notify() }

func (l *Log) notify() {
	l.chMu.Lock()
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	l.chMu.Unlock()
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// checkFraming checks that b is one whole magic-2 batch, without the CRC.
func checkFraming(b record.Batch) error {
	if len(b) < record.HeaderSize {
		return fmt.Errorf("%w: %w", ErrCorrupt, record.ErrShort)
	}
	if b.Magic() != 2 {
		return fmt.Errorf("%w: %w", ErrCorrupt, record.ErrMagic)
	}
	if b.Size() != len(b) || b.LastOffsetDelta() < 0 {
		return fmt.Errorf("%w: %w", ErrCorrupt, record.ErrLength)
	}
	return nil
}

// AppendAsLeader appends one client batch (content already validated by the caller,
// Kafka's LogValidator) as leader: it checks the producer state (Kafka's
// ProducerAppendInfo), assigns offsets from the LEO, stamps leaderEpoch and, when
// logAppendTimeMs >= 0, LogAppendTime (CRC recomputed). b is patched in place.
// A retry of one of the producer's last 5 batches returns Duplicate with the original
// offsets. Errors: ErrInvalidProducerEpoch, ErrOutOfOrderSequence, ErrCorrupt.
func (l *Log) AppendAsLeader(b record.Batch, leaderEpoch int32, logAppendTimeMs int64) (AppendInfo, error) {
	if err := checkFraming(b); err != nil {
		return AppendInfo{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return AppendInfo{}, ErrClosed
	}
	dup, err := l.ps.checkLeader(b)
	if err != nil {
		return AppendInfo{}, err
	}
	if dup != nil {
		return AppendInfo{FirstOffset: dup.firstOffset, LastOffset: dup.lastOffset, MaxTimestamp: dup.maxTs,
			OffsetOfMaxTimestamp: dup.lastOffset, Duplicate: true, LogStartOffset: l.logStart.Load()}, nil
	}
	b.SetBaseOffset(l.leo.Load())
	b.SetLeaderEpoch(leaderEpoch)
	if logAppendTimeMs >= 0 {
		b.SetLogAppendTime(logAppendTimeMs)
	}
	return l.appendLocked(b, []pending{{b: b}})
}

// AppendAsCoordinator appends a batch written by a coordinator of this broker, such
// as the group coordinator's transactional offset commits (Kafka's
// AppendOrigin.COORDINATOR): as AppendAsLeader, except that sequence numbers are
// neither checked nor used to find duplicates (coordinator batches carry base sequence
// 0, as Kafka's GroupMetadataManager writes them). A producer epoch below the
// producer's current epoch is ErrInvalidProducerEpoch (ProducerAppendInfo
// .checkProducerEpoch); ErrCorrupt as AppendAsLeader.
func (l *Log) AppendAsCoordinator(b record.Batch, leaderEpoch int32) (AppendInfo, error) {
	if err := checkFraming(b); err != nil {
		return AppendInfo{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return AppendInfo{}, ErrClosed
	}
	if err := l.ps.checkEpoch(b); err != nil {
		return AppendInfo{}, err
	}
	b.SetBaseOffset(l.leo.Load())
	b.SetLeaderEpoch(leaderEpoch)
	return l.appendLocked(b, []pending{{b: b}})
}

// AppendControlAsLeader appends a control batch built by record.BuildEndTxnMarker or
// record.BuildMirrorPIDReset at the LEO with leaderEpoch (failover, spec section 5).
// A marker with a producer epoch below the producer's current epoch gets
// ErrInvalidProducerEpoch.
func (l *Log) AppendControlAsLeader(b record.Batch, leaderEpoch int32) (AppendInfo, error) {
	if err := checkFraming(b); err != nil {
		return AppendInfo{}, err
	}
	if !b.IsControl() {
		return AppendInfo{}, fmt.Errorf("%w: not a control batch", ErrCorrupt)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return AppendInfo{}, ErrClosed
	}
	if _, err := l.ps.checkLeader(b); err != nil {
		return AppendInfo{}, err
	}
	b.SetBaseOffset(l.leo.Load())
	b.SetLeaderEpoch(leaderEpoch)
	return l.appendLocked(b, []pending{{b: b}})
}

// AppendAsFollower appends whole batches keeping their bytes, offsets and leader epochs
// (replication and mirroring, spec section 3). Each batch is CRC-checked and must start
// at or after the LEO and after the previous batch (gaps allowed), else ErrInvalidOffset;
// a framing or CRC error is ErrCorrupt and nothing is appended. Producer sequences are
// not validated; producer state, transactions and the aborted-transaction index are
// updated as for leader appends. A batch epoch above the latest cached epoch is assigned
// at the batch's base offset.
func (l *Log) AppendAsFollower(batches []byte) (AppendInfo, error) {
	return l.appendAsFollower(batches, true)
}

// AppendAsFollowerVerified is AppendAsFollower for batches whose CRC-32C the caller
// has already checked with record.Batch.Check (the mirror fetcher, spec section 3):
// framing and offsets are still checked, the CRC is not computed again.
func (l *Log) AppendAsFollowerVerified(batches []byte) (AppendInfo, error) {
	return l.appendAsFollower(batches, false)
}

func (l *Log) appendAsFollower(batches []byte, checkCRC bool) (AppendInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return AppendInfo{}, ErrClosed
	}
	var ps []pending
	next := l.leo.Load()
	it := record.IterBatches(batches)
	for it.Next() {
		b, off := it.Batch(), it.Pos()
		if checkCRC {
			if err := b.Check(); err != nil {
				return AppendInfo{}, fmt.Errorf("%w: at byte %d: %w", ErrCorrupt, off, err)
			}
		} else if err := checkFraming(b); err != nil {
			return AppendInfo{}, fmt.Errorf("at byte %d: %w", off, err)
		}
		if b.BaseOffset() < next {
			return AppendInfo{}, fmt.Errorf("%w: batch base offset %d, expected at least %d", ErrInvalidOffset, b.BaseOffset(), next)
		}
		next = b.NextOffset()
		ps = append(ps, pending{b: b, off: off})
	}
	if err := it.Err(); err != nil {
		return AppendInfo{}, fmt.Errorf("%w: at byte %d: %w", ErrCorrupt, it.Pos(), err)
	}
	if len(ps) == 0 {
		return AppendInfo{FirstOffset: -1, LastOffset: -1, MaxTimestamp: -1, OffsetOfMaxTimestamp: -1,
			LogStartOffset: l.logStart.Load()}, nil
	}
	return l.appendLocked(batches, ps)
}

// appendLocked writes batches (subslices of buf at their offsets, in order, contiguous)
// to the log, rolling segments as needed, then updates indexes, producer state and the
// LEO. An I/O error takes the log directory offline (ErrLogDirOffline wrapping it;
// ErrLogDirOffline alone once it is). The caller holds mu.
func (l *Log) appendLocked(buf []byte, ps []pending) (AppendInfo, error) {
	if l.health.offline() {
		return AppendInfo{}, ErrLogDirOffline
	}
	info, err := l.writeLocked(buf, ps)
	if err != nil {
		// a write, roll, index or checkpoint error: the log directory goes offline
		return AppendInfo{}, l.health.fail(fmt.Errorf("appending to %s: %w", l.dir, err))
	}
	return info, nil
}

// writeLocked is appendLocked's work; its errors are I/O errors.
func (l *Log) writeLocked(buf []byte, ps []pending) (AppendInfo, error) {
	info := AppendInfo{FirstOffset: ps[0].b.BaseOffset(), LastOffset: ps[len(ps)-1].b.LastOffset(),
		MaxTimestamp: -1, OffsetOfMaxTimestamp: -1}
	for _, p := range ps {
		if ts := p.b.MaxTimestamp(); ts > info.MaxTimestamp {
			info.MaxTimestamp, info.OffsetOfMaxTimestamp = ts, p.b.LastOffset()
		}
	}
	for i := 0; i < len(ps); {
		seg := l.active()
		if l.shouldRoll(seg, ps[i].b, seg.size.Load()) {
			if err := l.roll(ps[i].b.BaseOffset()); err != nil {
				return AppendInfo{}, err
			}
			seg = l.active()
			// Kafka's UnifiedLog.roll: the state after every batch below the new segment,
			// so that a reload replays at most the segments after it.
			l.takeSnapshot(seg.base, false)
		}
		start := seg.size.Load()
		pos := start
		j := i
		for j < len(ps) && (j == i || !l.shouldRoll(seg, ps[j].b, pos)) {
			if e := ps[j].b.LeaderEpoch(); l.epochs.assign(e, ps[j].b.BaseOffset()) {
				// Kafka records the epoch before the records it covers.
				if err := l.epochs.flush(); err != nil {
					return AppendInfo{}, err
				}
				if err := l.forgetDrop(e); err != nil {
					return AppendInfo{}, err
				}
			}
			pos += int64(len(ps[j].b))
			j++
		}
		from, to := ps[i].off, ps[j-1].off+len(ps[j-1].b)
		if _, err := seg.log.WriteAt(buf[from:to], start); err != nil {
			// best effort: leave no partial batch past the committed size (never read,
			// never ranged); recovery cuts it otherwise
			seg.log.Truncate(start)
			return AppendInfo{}, err
		}
		seg.size.Store(pos)
		pos = start
		for k := i; k < j; k++ {
			b := ps[k].b
			if err := seg.track(b, pos, l.cfg.IndexIntervalBytes, true); err != nil {
				return AppendInfo{}, err
			}
			if err := l.applyProducer(seg, b, true); err != nil {
				return AppendInfo{}, err
			}
			pos += int64(len(b))
			l.leo.Store(b.NextOffset())
			if !l.cfg.ExternalHighWatermark {
				l.setHighWatermarkLocked(b.NextOffset())
			}
		}
		i = j
	}
	info.LogStartOffset = l.logStart.Load()
	if l.leo.Load()-l.recoveryPoint >= l.cfg.FlushIntervalMessages {
		if err := l.flushLocked(); err != nil {
			return AppendInfo{}, err
		}
	}
	l.notify()
	return info, nil
}

// applyProducer feeds b to the producer state; an aborted transaction it completes is
// added to seg's transaction index when writeTxn is set.
func (l *Log) applyProducer(seg *segment, b record.Batch, writeTxn bool) error {
	if b.ProducerID() < 0 && !b.IsControl() {
		return nil
	}
	txn, aborted := l.ps.apply(b)
	if b.IsControl() {
		l.ps.completeBelow(l.hw.Load()) // a marker replayed below the HW is replicated
	}
	if b.IsTransactional() || b.IsControl() {
		l.storeFirstUnstable()
	}
	if aborted && writeTxn {
		return seg.idx.appendAborted(txn)
	}
	return nil
}

// shouldRoll follows Kafka's LogSegment.shouldRoll for appending b to seg holding size
// bytes: segment.bytes, segment.ms (by record timestamps, else wall clock), a full
// index, or an offset the segment cannot index (spec section 16).
func (l *Log) shouldRoll(seg *segment, b record.Batch, size int64) bool {
	if !seg.canHold(b.BaseOffset(), b.LastOffset()) {
		return true
	}
	if size == 0 {
		return false
	}
	if size+int64(len(b)) > l.cfg.SegmentBytes {
		return true
	}
	var waited int64
	if seg.firstBatchTs >= 0 {
		waited = b.MaxTimestamp() - seg.firstBatchTs
	} else {
		waited = time.Since(seg.created).Milliseconds()
	}
	if waited > l.cfg.SegmentMs {
		return true
	}
	return seg.indexFull(l.cfg.SegmentIndexBytes)
}

// roll makes a new active segment based at base (Kafka's LocalLog.roll). An empty
// active segment is replaced instead of kept.
func (l *Log) roll(base int64) error {
	old := l.active()
	if old.size.Load() == 0 && old.base == base {
		return nil
	}
	if old.size.Load() > 0 {
		if err := old.finishTimeIndex(); err != nil {
			return err
		}
	}
	seg, err := openSegment(l.dir, base)
	if err != nil {
		return err
	}
	if seg.size.Load() != 0 { // stale files from an earlier life of this offset
		seg.remove()
		if seg, err = openSegment(l.dir, base); err != nil {
			return err
		}
	}
	l.rw.Lock()
	if old.size.Load() == 0 && len(l.segs) > 0 {
		l.segs = l.segs[:len(l.segs)-1]
		if old.base != base {
			old.remove()
		}
	}
	l.segs = append(l.segs, seg)
	l.rw.Unlock()
	return nil
}

// Read returns whole batches starting with the batch containing offset (the first batch
// whose last offset is >= offset), at most maxBytes bytes from one segment, except that
// with minOneBatch the first batch is returned whole even if larger. Batches whose base
// offset is >= maxOffset (the HW or LSO, exclusive) are not returned. An offset below the
// log start or above the LEO is ErrOffsetOutOfRange; offset == LEO returns nothing.
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) ([]byte, error) {
	l.rw.RLock()
	defer l.rw.RUnlock()
	seg, start, end, _, err := l.locateLocked(offset, maxBytes, maxOffset, minOneBatch)
	if err != nil || seg == nil {
		return nil, err
	}
	out := make([]byte, end-start)
	if _, err := seg.log.ReadAt(out, start); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadRange is Read returning the batches as a range of the segment's .log file
// instead of bytes (Kafka's FileRecords slice handed to the network layer): the range
// holds a reference to the file, which stays open (and its bytes readable) until
// Release, even if the segment is deleted by retention, replaced by the cleaner,
// truncated or its log closed or deleted in the meantime. A zero FileRange (Len 0) is
// returned where Read returns nothing; it needs no Release.
func (l *Log) ReadRange(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (FileRange, error) {
	l.rw.RLock()
	defer l.rw.RUnlock()
	seg, start, end, last, err := l.locateLocked(offset, maxBytes, maxOffset, minOneBatch)
	if err != nil || seg == nil {
		return FileRange{LastOffset: -1}, err
	}
	seg.file.acquireRange()
	return FileRange{File: seg.log, Pos: start, Len: end - start, LastOffset: last, ref: seg.file}, nil
}

// locateLocked finds the bytes Read returns: the segment, the byte range [start, end)
// and the last offset of its last batch; a nil segment when there is nothing to read.
// ErrLogDirOffline once the log directory went offline. The caller holds rw.
func (l *Log) locateLocked(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (seg *segment, start, end, last int64, err error) {
	if l.closed.Load() {
		return nil, 0, 0, -1, ErrClosed
	}
	if l.health.offline() {
		return nil, 0, 0, -1, ErrLogDirOffline
	}
	leo := l.leo.Load()
	if offset < l.logStart.Load() || offset > leo {
		return nil, 0, 0, -1, fmt.Errorf("%w: offset %d, log start %d, LEO %d", ErrOffsetOutOfRange, offset, l.logStart.Load(), leo)
	}
	if offset == leo {
		return nil, 0, 0, -1, nil
	}
	var hdr [record.HeaderSize]byte
	for si := l.floorSegment(offset); si < len(l.segs); si++ {
		seg := l.segs[si]
		size := seg.size.Load()
		pos := int64(0)
		if offset > seg.base {
			pos = int64(seg.idx.lookup(int32(min(offset-seg.base, 1<<31-1))))
		}
		start, end, last := int64(-1), int64(0), int64(-1)
		for pos+record.HeaderSize <= size {
			if _, err := seg.log.ReadAt(hdr[:], pos); err != nil {
				return nil, 0, 0, -1, err
			}
			b := record.Batch(hdr[:])
			bsize := int64(b.Size())
			if bsize < record.HeaderSize || pos+bsize > size {
				return nil, 0, 0, -1, fmt.Errorf("%w: %s position %d", ErrCorrupt, seg.path, pos)
			}
			if start < 0 {
				if b.LastOffset() < offset {
					pos += bsize
					continue
				}
				if b.BaseOffset() >= maxOffset {
					return nil, 0, 0, -1, nil
				}
				start, end = pos, pos+bsize
				if bsize > int64(maxBytes) && !minOneBatch {
					return nil, 0, 0, -1, nil
				}
			} else {
				if b.BaseOffset() >= maxOffset || end+bsize-start > int64(maxBytes) {
					break
				}
				end += bsize
			}
			last = b.LastOffset()
			pos += bsize
		}
		if start < 0 {
			continue // offset lies past this segment's batches (a gap): try the next
		}
		return seg, start, end, last, nil
	}
	return nil, 0, 0, -1, nil
}

// floorSegment is the index of the last segment with base <= offset (0 if none).
// Callers hold rw or mu.
func (l *Log) floorSegment(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset })
	return max(i-1, 0)
}

// FirstUnstableOffset is the first offset of the oldest transaction that is open or
// whose marker the high watermark has not passed yet (the LSO bound, Kafka's
// firstUnstableOffset), false when there is none.
func (l *Log) FirstUnstableOffset() (int64, bool) {
	f := l.fuo.Load()
	return f, f >= 0
}

// storeFirstUnstable publishes the producer state's first unstable offset. mu held.
func (l *Log) storeFirstUnstable() {
	if f, ok := l.ps.firstUnstable(); ok {
		l.fuo.Store(f)
	} else {
		l.fuo.Store(-1)
	}
}

// HighWatermark is the high watermark (Kafka's UnifiedLog.highWatermark): the offset
// below which records are committed and readable by consumers; log start <= HW <= LEO.
// Without Config.ExternalHighWatermark it is the LEO.
func (l *Log) HighWatermark() int64 { return l.hw.Load() }

// UpdateHighWatermark moves the high watermark up to hw, clamped to [log start offset,
// LEO], and reports whether it advanced (Kafka's maybeIncrementHighWatermark, clamping
// where Kafka throws). The caller decides the value — the partition layer: on a leader
// the minimum LEO of the ISR, on a follower min(leader's HW, LEO) — and it never moves
// the HW back: only a truncation below it (capped at the new LEO), TruncateFullyAndStartAt
// (the new start) and a log start above it (raised to it) do. Kafka's follower path
// (maybeUpdateHighWatermark) may also lower a follower's HW to a new leader's that lags;
// kmirror keeps the higher one, which every ISR member had reached. An advance completes
// the transactions whose marker it passes (the LSO may move with it) and wakes Changed.
// Without Config.ExternalHighWatermark the HW is already the LEO and this is a no-op.
func (l *Log) UpdateHighWatermark(hw int64) (advanced bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return false
	}
	hw = min(max(hw, l.logStart.Load()), l.leo.Load())
	if hw <= l.hw.Load() {
		return false
	}
	l.setHighWatermarkLocked(hw)
	l.notify()
	return true
}

// setHighWatermarkLocked stores hw, then completes the transactions whose marker it
// passed: the HW is published before the first unstable offset it moves, the order
// HighWatermarkAndLSO relies on. mu held.
func (l *Log) setHighWatermarkLocked(hw int64) {
	l.hw.Store(hw)
	if l.ps.completeBelow(hw) {
		l.storeFirstUnstable()
	}
}

// setEndLocked moves the LEO to leo (a truncation or a new start), the HW first when it
// must come down with it, so that readers never see HW > LEO; without an external HW the
// HW follows it. mu held.
func (l *Log) setEndLocked(leo int64) {
	if l.hw.Load() > leo {
		l.hw.Store(leo)
	}
	l.leo.Store(leo)
	if !l.cfg.ExternalHighWatermark {
		l.setHighWatermarkLocked(leo)
	}
}

// HighWatermarkAndLSO returns the high watermark and the last stable offset: the first
// unstable offset when it is below the HW, else the HW (Kafka's
// UnifiedLog.lastStableOffset). The HW is read before the first unstable offset: appends
// publish the producer state before the LEO, the LEO before the HW, and an HW advance
// publishes the HW before the first unstable offset it moves. So a batch below the
// returned HW that opens a transaction is never below the returned LSO, a transaction is
// taken as decided only once the HW read has passed its marker, and LSO <= HW.
func (l *Log) HighWatermarkAndLSO() (hw, lso int64) {
	hw = l.hw.Load()
	if fu := l.fuo.Load(); fu >= 0 && fu < hw {
		return hw, fu
	}
	return hw, hw
}

// OpenTransactions lists the ongoing transactions, oldest first.
func (l *Log) OpenTransactions() []OpenTxn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ps.openTxns()
}

// ProducerEntries lists the producer state (DescribeProducers), by producer ID.
func (l *Log) ProducerEntries() []ProducerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ps.entries()
}

// RemoveExpiredProducers forgets every producer with no open transaction whose last
// batch's timestamp is expirationMs (producer.id.expiration.ms) or more before nowMs, as
// Kafka's removeExpiredProducers, and returns how many it removed. A later batch of such
// a producer is taken as a new producer's (any sequence), as Kafka does.
func (l *Log) RemoveExpiredProducers(nowMs, expirationMs int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return 0
	}
	return l.ps.removeExpired(nowMs, expirationMs)
}

// AbortedTransactions lists every aborted transaction overlapping [start, end) whichever
// segment it began in (spec section 16), as Kafka's collectAbortedTransactions: markers
// are indexed in their segment, and the scan stops at an entry whose LSO reaches end.
func (l *Log) AbortedTransactions(start, end int64) []AbortedTxn {
	l.rw.RLock()
	defer l.rw.RUnlock()
	var out []AbortedTxn
	for si := l.floorSegment(start); si < len(l.segs); si++ {
		x := &l.segs[si].idx
		x.mu.RLock()
		for _, t := range x.aborted {
			if t.LastOffset >= start && t.FirstOffset < end {
				out = append(out, t)
			}
			if t.LastStableOffset >= end {
				x.mu.RUnlock()
				return out
			}
		}
		x.mu.RUnlock()
	}
	return out
}

// LatestEpoch is the latest leader epoch in the cache (the newest batch epoch), −1 when
// empty.
func (l *Log) LatestEpoch() int32 { return l.epochs.latest() }

// LeaderEpoch is the partition's leader epoch: the newest of the latest batch epoch and
// every epoch raised without records (RaiseLeaderEpoch, TruncateToFenced), at least 0.
// A truncation never lowers it. A mirror partition keeps the two apart (spec section 6:
// its cache follows the batch epochs, the source's), which Kafka, whose leaders add their
// epoch to the cache on election, has no need to do.
//
// It takes no log lock (Metadata asks it for every partition, and a truncation holds rw
// across file writes): it never reads lower than before, because a truncation records
// its raise before it cuts the cache.
func (l *Log) LeaderEpoch() int32 { return max(0, l.epochs.latest(), l.fences.latest()) }

// forgetDrop removes the truncation point of an epoch that batches carry again (the
// source's batches reusing the number of an epoch this log dropped): the cache answers
// for it from now on, and a later truncation records a point of its own. mu held.
func (l *Log) forgetDrop(epoch int32) error {
	if l.drops.forget(epoch) {
		return l.drops.flush()
	}
	return nil
}

// EpochEntries is a copy of the leader-epoch cache, oldest first.
func (l *Log) EpochEntries() []EpochEntry { return l.epochs.snapshot() }

// EpochForOffset is the leader epoch of the batch holding offset according to the
// leader-epoch cache: the epoch of the latest entry starting at or before offset, −1 when
// none (Kafka's LeaderEpochFileCache.epochForOffset). It does not copy the cache.
func (l *Log) EpochForOffset(offset int64) int32 { return l.epochs.epochFor(offset) }

// RaiseLeaderEpoch raises LeaderEpoch to epoch at the LEO without adding a cache entry
// (a fence, written to leader-epoch-fences before it returns). Ignored when epoch <=
// LeaderEpoch.
func (l *Log) RaiseLeaderEpoch(epoch int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rw.Lock()
	defer l.rw.Unlock()
	if epoch <= l.LeaderEpoch() || !l.fences.assign(epoch, l.leo.Load()) {
		return nil
	}
	return l.fences.flush()
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch and the Fetch LastFetchedEpoch check:
// where the history a reader saw in epoch ends in this log, as (epoch, end offset).
//   - An epoch that batches in the log carry, and a negative one, are answered as
//     Kafka's LeaderEpochFileCache.endOffsetFor does: the LEO for the latest, else the
//     next entry's start; UNDEFINED_EPOCH (−1) is (−1, −1), another negative epoch
//     (epoch, first start).
//   - An epoch whose batches a truncation dropped: the truncation point, with the batch
//     epoch in force just before it (the reader moves back to where histories part).
//   - An epoch raised without records (a fence): until the next raise, or the LEO.
//   - Otherwise (an epoch this log never had, or a raise replaced by a higher one at the
//     same offset) Kafka's rule on the cache and the fences together: the largest epoch
//     <= epoch and the next start above it, (epoch, first start) below every entry, and
//     (−1, −1) above every entry — LeaderEpoch itself ends at the LEO.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	l.rw.RLock()
	defer l.rw.RUnlock()
	leo := l.leo.Load()
	if epoch < 0 || l.epochs.has(epoch) {
		return l.epochs.endOffsetFor(epoch, leo)
	}
	if at, ok := l.drops.get(epoch); ok {
		e := l.epochs.epochFor(at - 1)
		if e < 0 || e > epoch {
			e = epoch
		}
		return e, at
	}
	if end, ok := l.fences.rangeEnd(epoch, leo); ok {
		return epoch, end
	}
	if epoch == l.LeaderEpoch() {
		return epoch, leo
	}
	e, end := l.epochs.endOffsetFor(epoch, leo)
	if f, ok := l.fences.firstAbove(epoch); ok && (end < 0 || f.StartOffset < end) {
		if e < 0 {
			e = min(epoch, max(0, l.epochs.epochFor(f.StartOffset-1)))
		}
		return e, f.StartOffset
	}
	return e, end
}

// Flush fsyncs every segment written since the last flush and moves the recovery point
// to the LEO.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil
	}
	return l.flushLocked()
}

func (l *Log) flushLocked() error {
	for i := l.floorSegment(l.recoveryPoint); i < len(l.segs); i++ {
		if err := l.segs[i].sync(); err != nil {
			return err
		}
	}
	if err := l.syncSnapshots(); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	l.recoveryPoint = l.leo.Load()
	l.lastFlush = time.Now()
	return nil
}

// maybeTimeFlush flushes when flush.ms has passed since the last flush.
func (l *Log) maybeTimeFlush(now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() || l.recoveryPoint == l.leo.Load() || now.Sub(l.lastFlush).Milliseconds() < l.cfg.FlushIntervalMs {
		return nil
	}
	return l.flushLocked()
}

// Close writes a producer-state snapshot at the LEO (Kafka's UnifiedLog.close, so that
// the next open replays nothing), flushes and closes the log's files.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil
	}
	var err error
	if !l.health.offline() { // an offline directory is not written to, only closed
		if len(l.segs) > 1 || l.active().size.Load() > 0 {
			l.takeSnapshot(l.leo.Load(), true)
		}
		err = l.flushLocked()
	}
	l.rw.Lock()
	l.closed.Store(true)
	for _, s := range l.segs {
		if e := s.close(); e != nil && err == nil {
			err = e
		}
	}
	l.rw.Unlock()
	l.notify()
	return err
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	l.mu.Lock()
	if !l.closed.Load() {
		l.rw.Lock()
		l.closed.Store(true)
		for _, s := range l.segs {
			s.close()
		}
		l.rw.Unlock()
	}
	l.mu.Unlock()
	l.notify()
	return os.RemoveAll(l.dir)
}
