package storage

import (
	"fmt"
	"io"
	"os"
	"time"
)

// TruncateTo removes every offset >= offset (Kafka's UnifiedLog.truncateTo): later
// segments are deleted, the segment holding offset is cut at the first batch whose last
// offset is >= offset (a batch straddling offset goes whole, so the LEO becomes its base
// offset), indexes and the leader-epoch cache (truncateFromEnd) are rebuilt, a high
// watermark above the new LEO is capped at it, the producer snapshots above the new LEO
// are deleted and the producer and transaction state reloaded from the newest snapshot
// left, replaying only the batch headers after it. LeaderEpoch is kept: a dropped epoch
// stays a fence at the new LEO. A no-op when offset >= LEO; below the log start it is
// TruncateFullyAndStartAt(offset).
func (l *Log) TruncateTo(offset int64) error { return l.truncate(offset, false) }

// TruncateToFenced is TruncateTo followed, in the same critical section, by a leader
// epoch raise to LeaderEpoch()+1 at the new LEO (RaiseLeaderEpoch). A reader that sees the
// shorter log (ReadRange) sees the raised epoch too, so a consumer that had read the
// dropped tail is fenced (FENCED_LEADER_EPOCH, then OffsetForLeaderEpoch finds the
// divergence point) instead of being answered OFFSET_OUT_OF_RANGE, as when a Kafka
// leader truncates after an epoch change. Waiting fetches are woken after both.
func (l *Log) TruncateToFenced(offset int64) error { return l.truncate(offset, true) }

func (l *Log) truncate(offset int64, fence bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	if offset >= l.leo.Load() {
		return nil
	}
	l.segsGen++
	l.cleanedTo.Store(min(l.cleanedTo.Load(), offset)) // Kafka's maybeTruncateCheckpoint
	keep := l.LeaderEpoch()
	if fence {
		keep++
	}
	if offset < l.logStart.Load() {
		return l.truncateFullyLocked(offset, keep)
	}
	l.rw.Lock()
	if err := l.noteTruncation(offset, keep, l.epochs.epochFor(offset-1)); err != nil {
		l.rw.Unlock()
		return err
	}
	if err := l.truncateSegmentsLocked(offset); err != nil {
		l.rw.Unlock()
		return err
	}
	// a batch straddling offset moved the LEO below it: note that too
	leo := l.leo.Load()
	err := l.noteTruncation(leo, keep, l.epochs.epochFor(leo-1))
	changed := l.epochs.truncateFromEnd(leo)
	l.rw.Unlock()
	if err != nil {
		return err
	}
	if changed {
		if err := l.epochs.flush(); err != nil {
			return err
		}
	}
	l.recoveryPoint = min(l.recoveryPoint, l.leo.Load())
	err = l.rebuildProducerState()
	l.notify()
	return err
}

// noteTruncation records what EndOffsetForEpoch and LeaderEpoch need from a truncation
// that cuts the log at at (called before the files are touched, and again at the LEO the
// log ends at), in their files: the epochs of the cache entries at or after at end there,
// earlier truncation points past at move to it, fences past at move to it, and the leader
// epoch becomes at least keep, above remaining (the newest batch epoch the cache keeps).
// Written first, they survive a crash in the middle of the truncation; recovery clamps
// them to the LEO it finds. mu and rw held.
func (l *Log) noteTruncation(at int64, keep, remaining int32) error {
	dropped := l.drops.record(l.epochs.startingAt(at), at)
	if l.drops.clamp(min(l.logStart.Load(), at), at) {
		dropped = true
	}
	fenced := l.fences.clampTo(at)
	if keep > max(remaining, l.fences.latest()) && l.fences.assign(keep, at) {
		fenced = true
	}
	if dropped {
		if err := l.drops.flush(); err != nil {
			return err
		}
	}
	if fenced {
		return l.fences.flush()
	}
	return nil
}

// truncateSegmentsLocked does the file work of TruncateTo; the caller holds mu and rw.
func (l *Log) truncateSegmentsLocked(offset int64) error {
	for len(l.segs) > 1 && l.active().base >= offset {
		seg := l.active()
		l.segs = l.segs[:len(l.segs)-1]
		if err := seg.remove(); err != nil {
			return err
		}
	}
	seg := l.active()
	// Find the first batch whose last offset is >= offset.
	sc := scanner{f: seg.log, end: seg.size.Load(), shared: &l.scanBuf}
	if offset > seg.base {
		sc.pos = int64(seg.idx.lookup(int32(min(offset-seg.base, 1<<31-1))))
	}
	cut, newLEO := seg.size.Load(), offset
	for {
		b, pos, err := sc.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, seg.path, err)
		}
		if b.LastOffset() >= offset {
			cut = pos
			newLEO = min(offset, b.BaseOffset())
			break
		}
	}
	if cut < seg.size.Load() && seg.file.ranged.Load() {
		// Bytes past cut may still be referenced by a FileRange or by a socket that
		// sendfile handed them to: keep them intact in the old file and go on with a
		// copy of the part that stays.
		if err := seg.replaceFileWithPrefix(cut); err != nil {
			return err
		}
	} else if err := seg.log.Truncate(cut); err != nil {
		return err
	}
	seg.size.Store(cut)
	if err := seg.idx.truncateAborted(offset); err != nil {
		return err
	}
	if err := l.reindex(seg); err != nil {
		return err
	}
	if cut == 0 {
		newLEO = max(newLEO, seg.base)
	}
	l.setEndLocked(max(newLEO, seg.nextOffset))
	return nil
}

// reindex rebuilds seg's offset and time indexes and in-memory state from its batch
// headers, keeping its transaction index.
func (l *Log) reindex(seg *segment) error {
	x := &seg.idx
	x.mu.Lock()
	x.offsets, x.times = x.offsets[:0], x.times[:0]
	x.mu.Unlock()
	for _, f := range []*os.File{x.offFile, x.timeFile} {
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	seg.resetState()
	sc := scanner{f: seg.log, end: seg.size.Load(), shared: &l.scanBuf}
	for {
		b, pos, err := sc.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, seg.path, err)
		}
		if err := seg.track(b, pos, l.cfg.IndexIntervalBytes, true); err != nil {
			return err
		}
	}
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log at offset: log
// start = HW = LEO = offset; the leader-epoch cache is cleared, producer state reset and
// every producer snapshot deleted (Kafka's UnifiedLog.truncateFullyAndStartAt).
// LeaderEpoch is kept as a fence.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	return l.truncateFullyLocked(offset, l.LeaderEpoch())
}

// truncateFullyLocked empties the log and restarts it at offset with LeaderEpoch at least
// keep, before readers see the empty log (TruncateToFenced); every dropped epoch ends at
// the new log start.
func (l *Log) truncateFullyLocked(offset int64, keep int32) error {
	if offset < 0 {
		return fmt.Errorf("%w: negative offset %d", ErrOffsetOutOfRange, offset)
	}
	l.segsGen++
	l.cleanedTo.Store(min(l.cleanedTo.Load(), offset))
	l.rw.Lock()
	if err := l.noteTruncation(min(offset, l.leo.Load()), keep, -1); err != nil {
		l.rw.Unlock()
		return err
	}
	for _, s := range l.segs {
		if err := s.remove(); err != nil {
			l.rw.Unlock()
			return err
		}
	}
	l.segs = nil
	seg, err := openSegment(l.dir, offset)
	if err == nil && seg.size.Load() != 0 {
		seg.remove()
		seg, err = openSegment(l.dir, offset)
	}
	if err != nil {
		l.rw.Unlock()
		return err
	}
	l.segs = []*segment{seg}
	// Stored in an order that keeps log start <= HW <= LEO for readers.
	l.logStart.Store(min(l.logStart.Load(), offset))
	l.setEndLocked(offset)
	l.setHighWatermarkLocked(offset)
	l.logStart.Store(offset)
	l.epochs.mu.Lock()
	l.epochs.entries = nil
	l.epochs.mu.Unlock()
	moved := l.drops.clamp(offset, offset) // nothing before the new log start to go back to
	l.rw.Unlock()
	l.ps.reset()
	l.fuo.Store(-1)
	l.deleteSnapshots(func(int64) bool { return true })
	if err := l.epochs.flush(); err != nil {
		return err
	}
	if moved {
		if err := l.drops.flush(); err != nil {
			return err
		}
	}
	l.recoveryPoint = offset
	l.notify()
	if err := syncDir(l.dir); err != nil {
		return err
	}
	return l.persistLogStartLocked() // the log start may have moved down
}

// persistLogStartLocked writes the log start offset to disk through persistLogStart
// (a no-op without one). mu held.
func (l *Log) persistLogStartLocked() error {
	if l.persistLogStart == nil {
		return nil
	}
	return l.persistLogStart()
}

// AdvanceLogStartOffset moves the log start offset up to offset (Kafka's
// maybeIncrementLogStartOffset: DeleteRecords, a follower taking its leader's log start,
// or the source's log start on a mirror, spec section 3); lower values are ignored.
// The new log start is on disk (log-start-offset-checkpoint) before this returns and
// before any segment is deleted, so a crash never brings deleted records back; a failed
// checkpoint write is returned and deletes nothing. Segments wholly below it are deleted
// (never the active one), the epoch cache is truncated from the start, producers with no
// batch left are evicted and the snapshots below the first segment left are deleted. offset above the high watermark is
// ErrOffsetOutOfRange, as in Kafka (without an external HW, the LEO): the log start never
// passes the HW, so nothing uncommitted is deleted.
func (l *Log) AdvanceLogStartOffset(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	if hw := l.hw.Load(); offset > hw {
		return fmt.Errorf("%w: log start %d above the high watermark %d (LEO %d)", ErrOffsetOutOfRange, offset, hw, l.leo.Load())
	}
	if offset <= l.logStart.Load() {
		return nil
	}
	l.logStart.Store(offset)
	if err := l.persistLogStartLocked(); err != nil {
		return err
	}
	n := 0
	for n+1 < len(l.segs) && l.segs[n+1].base <= offset {
		n++
	}
	if err := l.deleteOldestLocked(n); err != nil {
		return err
	}
	l.notify()
	return nil
}

// deleteOldestLocked deletes the n oldest segments and their producer snapshots, raises
// the log start to the new first segment's base (and the HW with it, as Kafka's
// updateLogStartOffset; callers keep it at or below the HW), and truncates the epoch
// cache and producer state from the start.
func (l *Log) deleteOldestLocked(n int) error {
	if n > 0 {
		l.segsGen++
		l.rw.Lock()
		old := append([]*segment(nil), l.segs[:n]...)
		l.segs = append(l.segs[:0:0], l.segs[n:]...)
		if b := l.segs[0].base; b > l.logStart.Load() {
			l.logStart.Store(min(b, l.leo.Load()))
		}
		l.rw.Unlock()
		for _, s := range old {
			if err := s.remove(); err != nil {
				return err
			}
		}
	}
	start := l.logStart.Load()
	if start > l.hw.Load() {
		l.setHighWatermarkLocked(start)
	}
	first := l.segs[0].base
	l.deleteSnapshots(func(off int64) bool { return off < first })
	if l.epochs.truncateFromStart(start) {
		if err := l.epochs.flush(); err != nil {
			return err
		}
	}
	if l.drops.clamp(start, l.leo.Load()) {
		if err := l.drops.flush(); err != nil {
			return err
		}
	}
	l.ps.evictBefore(start)
	return nil
}

// ApplyRetention deletes the oldest segments breaching retention.ms (nowMs − segment max
// timestamp, or file modification time when it has none) or retention.bytes, never the
// active segment nor one holding offsets at or above the high watermark (Kafka's
// deleteRetentionMsBreachedSegments and deleteRetentionSizeBreachedSegments, through
// deletableSegments), and advances the log start, on disk before any segment is
// deleted. It returns the number of segments deleted. A no-op unless cleanup.policy
// includes delete.
func (l *Log) ApplyRetention(nowMs int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return 0, ErrClosed
	}
	if !l.cfg.deletes() {
		return 0, nil // compact-only logs are bounded by the cleaner, not retention
	}
	n := 0
	if l.cfg.RetentionMs >= 0 {
		for n+1 < len(l.segs) {
			seg := l.segs[n]
			seg.idx.mu.RLock()
			ts := seg.maxTs
			seg.idx.mu.RUnlock()
			if ts < 0 {
				if st, err := seg.log.Stat(); err == nil {
					ts = st.ModTime().UnixMilli()
				} else {
					ts = time.Now().UnixMilli()
				}
			}
			if nowMs-ts <= l.cfg.RetentionMs {
				break
			}
			n++
		}
	}
	if l.cfg.RetentionBytes >= 0 {
		var total int64
		for _, s := range l.segs {
			total += s.size.Load()
		}
		for _, s := range l.segs[:n] {
			total -= s.size.Load()
		}
		diff := total - l.cfg.RetentionBytes
		for n+1 < len(l.segs) && diff-l.segs[n].size.Load() >= 0 {
			diff -= l.segs[n].size.Load()
			n++
		}
	}
	hw := l.hw.Load()
	for n > 0 && l.segs[n].base > hw {
		n-- // segs[n−1] holds offsets at or above the HW
	}
	if n == 0 {
		return 0, nil
	}
	if b := min(l.segs[n].base, l.leo.Load()); b > l.logStart.Load() {
		l.logStart.Store(b) // checkpointed before the segments go, as Kafka's deleteSegments
		if err := l.persistLogStartLocked(); err != nil {
			return 0, err
		}
	}
	if err := l.deleteOldestLocked(n); err != nil {
		return 0, err
	}
	l.notify()
	return n, nil
}

// replaceFileWithPrefix replaces the segment's .log file by a new file holding its
// first n bytes (copy-on-truncate), renamed over the old name. The old file is never
// modified again: it stays open for the FileRanges that reference it and is closed by
// the last Release. The caller holds mu and rw.
func (s *segment) replaceFileWithPrefix(n int64) error {
	path := s.path + logSuffix
	tmp := path + ".truncated.tmp" // removed at start-up if left behind by a crash
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	// The old file's shared offset is used by nothing else (reads and writes are
	// positional), so it can drive copy_file_range(2) through File.ReadFrom.
	if _, err := s.log.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	if k, err := f.ReadFrom(io.LimitReader(s.log, n)); err != nil || k != n {
		if err == nil {
			err = fmt.Errorf("%w: copied %d of %d bytes of %s", io.ErrUnexpectedEOF, k, n, path)
		}
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	old := s.file
	s.file, s.log = newSegFile(f), f
	return old.release()
}
