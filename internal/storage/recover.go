package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// load opens the segments of l.dir and rebuilds derived state (Kafka's LogLoader).
// Segments wholly below recoveryPoint are trusted: their indexes are loaded (rebuilt if
// they fail the sanity check) and, when the leader-epoch checkpoint is readable, their
// in-memory state is restored from the indexes, the first batch header and the batches
// after the last offset-index entry (Kafka's LogSegment reads the same lazily), not from
// every batch header. Every other segment is recovered: each batch is checked (framing,
// magic, CRC, increasing offsets), a bad tail is cut and later segments are deleted, each
// logged at WARN. If a trusted segment turns out damaged, loading restarts with full
// recovery.
//
// The producer state starts from the newest readable producer snapshot at or below
// snapLimit and the first segment to recover or reindex (whose transaction index is
// rebuilt from the state at its start), and replays the batch headers after it; a
// snapshot past the recovered LEO is deleted and an older one used.
func (l *Log) load(recoveryPoint, ckLogStart, snapLimit int64) error {
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	epochErr := l.epochs.load()
	if epochErr != nil {
		l.logger.Warn("ignoring unreadable leader-epoch-checkpoint", "err", epochErr)
		l.epochs.entries = nil
	}
	// The batches' epochs need not be read again when the checkpoint holds them (appends
	// write it before the batch of a new epoch).
	epochsKnown := epochErr == nil && fileExists(l.epochs.path)
	if err := l.fences.load(); err != nil {
		l.logger.Warn("ignoring unreadable leader-epoch-fences", "err", err)
		l.fences.entries = nil
	}
	if err := l.drops.load(); err != nil {
		l.logger.Warn("ignoring unreadable leader-epoch-truncations", "err", err)
		l.drops.at = map[int32]int64{}
	}
	if err := l.listSnapshots(); err != nil {
		return err
	}
	l.removeStraySnapshots(bases)
	trusted := func(i int) bool {
		return recoveryPoint >= 0 && (i == len(bases)-1 || bases[i+1] <= recoveryPoint)
	}
	for i, base := range bases {
		if !trusted(i) {
			snapLimit = min(snapLimit, base) // recovery rebuilds its transaction index from here
			break
		}
	}
	from := l.loadSnapshot(snapLimit) // batches ending at or after from are replayed
	if len(bases) == 0 {
		seg, err := openSegment(l.dir, max(ckLogStart, 0))
		if err != nil {
			return err
		}
		l.segs = []*segment{seg}
	}
	prevNext := int64(-1)
	dropping := false
	for i, base := range bases {
		if dropping {
			l.logger.Warn("deleting segment after a corrupt one", "segment", segmentName(base)+logSuffix)
			for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
				os.Remove(filepath.Join(l.dir, segmentName(base)+suffix))
			}
			continue
		}
		seg, err := openSegment(l.dir, base)
		if err != nil {
			l.closeSegments()
			return err
		}
		last := i == len(bases)-1
		if trusted(i) {
			loaded := seg.idx.load(seg.size.Load())
			if !loaded && from > base {
				// Its transaction index is rebuilt from the producer state at its start.
				return l.restartLoad(seg, recoveryPoint, ckLogStart, base)
			}
			if !loaded {
				l.logger.Warn("rebuilding damaged index", "segment", segmentName(base))
				if err := seg.idx.reset(); err != nil {
					seg.close()
					l.closeSegments()
					return err
				}
			}
			var serr *scanError
			if loaded && epochsKnown {
				if serr = l.loadSegmentTail(seg, &prevNext); serr == nil {
					serr = l.replayProducers(seg, from)
				}
			} else {
				serr = l.scanSegment(seg, &prevNext, false, !loaded, last, from)
			}
			if serr != nil {
				// A trusted segment is damaged after all: recover everything.
				l.logger.Warn("segment below the recovery point is damaged; recovering the whole log",
					"segment", segmentName(base)+logSuffix, "reason", serr.Error())
				return l.restartLoad(seg, -1, ckLogStart, math.MaxInt64)
			}
		} else {
			if err := seg.idx.reset(); err != nil {
				seg.close()
				l.closeSegments()
				return err
			}
			if serr := l.scanSegment(seg, &prevNext, true, true, last, from); serr != nil {
				dropped := seg.size.Load() - serr.pos
				l.logger.Warn("cutting corrupt log tail", "segment", segmentName(base)+logSuffix,
					"position", serr.pos, "bytes", dropped, "reason", serr.reason)
				if err := seg.log.Truncate(serr.pos); err != nil {
					seg.close()
					l.closeSegments()
					return err
				}
				seg.size.Store(serr.pos)
				dropping = !last
				if serr.pos == 0 && len(l.segs) > 0 {
					l.logger.Warn("deleting emptied segment", "segment", segmentName(base)+logSuffix)
					seg.remove()
					continue
				}
			}
			if err := seg.sync(); err != nil {
				seg.close()
				l.closeSegments()
				return err
			}
		}
		l.segs = append(l.segs, seg)
	}
	act := l.active()
	leo := max(act.base, prevNext)
	l.leo.Store(leo)
	start := max(l.segs[0].base, ckLogStart)
	start = min(start, leo)
	l.logStart.Store(start)
	l.recoveryPoint = leo
	if from > leo {
		// The snapshot describes batches the log no longer has (its tail was cut).
		l.logger.Warn("producer snapshot past the log end offset; reloading the producer state",
			"file", segmentName(from)+snapshotSuffix, "logEndOffset", leo)
		if err := l.rebuildProducerState(); err != nil {
			l.closeSegments()
			return err
		}
	}
	l.deleteSnapshots(func(off int64) bool { return off > leo })
	// A cache entry past the LEO has no batch. One at the LEO has none either but stays
	// (Kafka drops it, but a Kafka leader re-assigns its epoch at election): it was
	// re-based there by truncateFromStart when the log start reached the LEO, or recorded
	// just before a batch that a crash lost, which comes back with that epoch — unless a
	// truncation dropped its epoch (a crash between noting the truncation and rewriting
	// the checkpoint). The leader epoch is never lowered: the newest epoch removed stays
	// as a fence.
	cut := leo + 1
	if n := len(l.epochs.entries); n > 0 && l.epochs.entries[n-1].StartOffset == leo {
		if _, dropped := l.drops.get(l.epochs.entries[n-1].Epoch); dropped {
			cut = leo
		}
	}
	remaining := max(l.epochs.epochFor(cut-1), l.fences.latest())
	fenced := false
	for _, e := range l.epochs.startingAt(cut) {
		if e.Epoch > remaining {
			fenced = l.fences.assign(e.Epoch, leo) || fenced
		}
	}
	changed := l.epochs.truncateFromEnd(cut)
	if l.epochs.truncateFromStart(start) {
		changed = true
	}
	if changed || (len(l.epochs.entries) > 0 && !fileExists(l.epochs.path)) {
		if err := l.epochs.flush(); err != nil {
			l.closeSegments()
			return err
		}
	}
	if l.fences.clampTo(leo) || fenced {
		if err := l.fences.flush(); err != nil {
			l.closeSegments()
			return err
		}
	}
	forgot := false
	for _, e := range l.epochs.entries {
		forgot = l.drops.forget(e.Epoch) || forgot // a crash between noting a truncation and cutting
	}
	if l.drops.clamp(start, leo) || forgot {
		if err := l.drops.flush(); err != nil {
			l.closeSegments()
			return err
		}
	}
	l.ps.evictBefore(start)
	l.storeFirstUnstable()
	return syncDir(l.dir)
}

// restartLoad closes what load opened so far (seg and l.segs), forgets the state it
// rebuilt and loads again.
func (l *Log) restartLoad(seg *segment, recoveryPoint, ckLogStart, snapLimit int64) error {
	seg.close()
	l.closeSegments()
	l.segs = nil
	l.ps.reset()
	l.fuo.Store(-1)
	return l.load(recoveryPoint, ckLogStart, snapLimit)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (l *Log) closeSegments() {
	for _, s := range l.segs {
		s.close()
	}
}

// listSegments returns the base offsets of the .log files in l.dir, removing leftover
// temporary files and index files without a .log file, after finishing or discarding
// an interrupted cleaning (completeSwaps).
func (l *Log) listSegments() ([]int64, error) {
	if err := completeSwaps(l.dir, l.logger); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	logs := map[int64]bool{}
	var idx []string
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".deleted") {
			os.Remove(filepath.Join(l.dir, name))
			continue
		}
		ext := filepath.Ext(name)
		stem := strings.TrimSuffix(name, ext)
		if len(stem) != 20 {
			continue
		}
		base, err := strconv.ParseInt(stem, 10, 64)
		if err != nil || base < 0 {
			continue
		}
		switch ext {
		case logSuffix:
			logs[base] = true
		case indexSuffix, timeIndexSuffix, txnIndexSuffix:
			idx = append(idx, name)
		}
	}
	for _, name := range idx {
		base, _ := strconv.ParseInt(strings.TrimSuffix(name, filepath.Ext(name)), 10, 64)
		if !logs[base] {
			os.Remove(filepath.Join(l.dir, name))
		}
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// scanSegment reads seg's batches from the start, rebuilding its in-memory state, its
// offset and time indexes when rebuild is set (the transaction index too, which needs
// from <= seg.base), the producer state from the batches ending at or after from, and the
// epoch cache. full checks CRCs. *prevNext is the offset after the previous batch in the
// log (−1 at the start); each batch must start at or after it.
func (l *Log) scanSegment(seg *segment, prevNext *int64, full, rebuild, active bool, from int64) *scanError {
	seg.resetState()
	sc := scanner{f: seg.log, end: seg.size.Load(), full: full, shared: &l.scanBuf}
	for {
		b, pos, err := sc.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var se *scanError
			if errors.As(err, &se) {
				return se
			}
			return &scanError{pos, err.Error()}
		}
		if b.BaseOffset() < *prevNext || !seg.canHold(b.BaseOffset(), b.LastOffset()) {
			return &scanError{pos, fmt.Sprintf("batch offsets %d..%d out of order (previous end %d, segment base %d)",
				b.BaseOffset(), b.LastOffset(), *prevNext, seg.base)}
		}
		if err := seg.track(b, pos, l.cfg.IndexIntervalBytes, rebuild); err != nil {
			return &scanError{pos, err.Error()}
		}
		if b.LastOffset() >= from {
			if err := l.applyProducer(seg, b, rebuild); err != nil {
				return &scanError{pos, err.Error()}
			}
		}
		l.epochs.assign(b.LeaderEpoch(), b.BaseOffset())
		*prevNext = b.NextOffset()
	}
	if rebuild && !active {
		if err := seg.finishTimeIndex(); err != nil {
			return &scanError{sc.end, err.Error()}
		}
	}
	return nil
}

// loadSegmentTail restores a trusted segment's in-memory state without reading every
// batch header: the first batch's timestamp from its header, the largest timestamp and
// its batch from the last time-index entry (finishTimeIndex writes it when the segment
// stops being active), and the rest from the batches after the last offset-index entry,
// which are read as an append tracks them. The indexes are loaded; prevNext as in
// scanSegment.
func (l *Log) loadSegmentTail(seg *segment, prevNext *int64) *scanError {
	seg.resetState()
	size := seg.size.Load()
	sc := scanner{f: seg.log, end: size, shared: &l.scanBuf}
	first, _, err := sc.next()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return asScanError(err, 0)
	}
	if first.BaseOffset() < *prevNext || !seg.canHold(first.BaseOffset(), first.LastOffset()) {
		return &scanError{0, fmt.Sprintf("first batch at offset %d (previous end %d, segment base %d)", first.BaseOffset(), *prevNext, seg.base)}
	}
	firstTs := first.MaxTimestamp() // first is in the scan buffer, which the scans below reuse
	x := &seg.idx
	tail := int64(0)
	if n := len(x.offsets); n > 0 {
		tail = int64(x.offsets[n-1].pos)
	}
	if n := len(x.times); n > 0 {
		te := x.times[n-1]
		pos, err := l.batchEndingAt(seg, seg.base+int64(te.rel))
		if err != nil {
			return err
		}
		seg.maxTs, seg.maxTsPos, seg.maxTsBatchEnd = te.ts, pos, seg.base+int64(te.rel)
	}
	sc = scanner{f: seg.log, pos: tail, end: size, shared: &l.scanBuf}
	for next := *prevNext; ; {
		b, pos, err := sc.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return asScanError(err, pos)
		}
		if b.BaseOffset() < next || !seg.canHold(b.BaseOffset(), b.LastOffset()) {
			return &scanError{pos, fmt.Sprintf("batch offsets %d..%d out of order (previous end %d, segment base %d)",
				b.BaseOffset(), b.LastOffset(), next, seg.base)}
		}
		if err := seg.track(b, pos, l.cfg.IndexIntervalBytes, false); err != nil {
			return &scanError{pos, err.Error()}
		}
		next = b.NextOffset()
	}
	seg.firstBatchTs = firstTs
	*prevNext = seg.nextOffset
	return nil
}

// batchEndingAt is the position in seg of the batch whose last offset is last, found from
// the offset index.
func (l *Log) batchEndingAt(seg *segment, last int64) (int64, *scanError) {
	sc := scanner{f: seg.log, pos: int64(seg.idx.lookup(int32(last - seg.base))), end: seg.size.Load(), shared: &l.scanBuf}
	for {
		b, pos, err := sc.next()
		if err != nil {
			return 0, asScanError(err, pos)
		}
		if b.LastOffset() == last {
			return pos, nil
		}
		if b.LastOffset() > last {
			return 0, &scanError{pos, fmt.Sprintf("time index names offset %d, inside the batch at %d", last, b.BaseOffset())}
		}
	}
}

// replayProducers feeds the producer state the batches of seg ending at or after from,
// read from the offset index's entry for from; the transaction index is not written (it
// is loaded, or truncated to match). mu held, or the log not yet published.
func (l *Log) replayProducers(seg *segment, from int64) *scanError {
	if from >= seg.nextOffset {
		return nil // every batch of seg is below the snapshot
	}
	sc := scanner{f: seg.log, end: seg.size.Load(), shared: &l.scanBuf}
	if from > seg.base {
		sc.pos = int64(seg.idx.lookup(int32(min(from-seg.base, 1<<31-1))))
	}
	for {
		b, pos, err := sc.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return asScanError(err, pos)
		}
		if b.LastOffset() < from {
			continue
		}
		if err := l.applyProducer(seg, b, false); err != nil {
			return &scanError{pos, err.Error()}
		}
	}
}

// asScanError is err from scanner.next as a *scanError (reads fail with one already).
func asScanError(err error, pos int64) *scanError {
	var se *scanError
	if errors.As(err, &se) {
		return se
	}
	return &scanError{pos, err.Error()}
}

// rebuildProducerState reloads the producer state after the log's end moved down
// (truncation, or a load whose snapshot lay past the data): the snapshots above the LEO
// are deleted, the newest one left is loaded and the batch headers after it replayed
// (Kafka's rebuildProducerState and truncateAndReload). mu held.
func (l *Log) rebuildProducerState() error {
	leo := l.leo.Load()
	l.deleteSnapshots(func(off int64) bool { return off > leo })
	l.fuo.Store(-1)
	from := l.loadSnapshot(leo)
	for si := l.floorSegment(max(from, 0)); si < len(l.segs); si++ {
		if serr := l.replayProducers(l.segs[si], from); serr != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, l.segs[si].path, serr)
		}
	}
	l.ps.evictBefore(l.logStart.Load())
	l.ps.completeBelow(l.hw.Load())
	l.storeFirstUnstable()
	return nil
}
