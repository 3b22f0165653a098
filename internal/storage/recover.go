package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// load opens the segments of l.dir and rebuilds derived state (Kafka's LogLoader).
// Segments wholly below recoveryPoint are trusted: their indexes are loaded (rebuilt if
// they fail the sanity check) and only batch headers are read. Every other segment is
// recovered: each batch is checked (framing, magic, CRC, increasing offsets), a bad tail
// is cut and later segments are deleted, each logged at WARN. If a trusted segment turns
// out damaged, loading restarts with full recovery.
func (l *Log) load(recoveryPoint, ckLogStart int64) error {
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	if err := l.epochs.load(); err != nil {
		l.logger.Warn("ignoring unreadable leader-epoch-checkpoint", "err", err)
		l.epochs.entries = nil
	}
	if err := l.fences.load(); err != nil {
		l.logger.Warn("ignoring unreadable leader-epoch-fences", "err", err)
		l.fences.entries = nil
	}
	if err := l.drops.load(); err != nil {
		l.logger.Warn("ignoring unreadable leader-epoch-truncations", "err", err)
		l.drops.at = map[int32]int64{}
	}
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
		trusted := recoveryPoint >= 0 && (last || bases[i+1] <= recoveryPoint)
		if trusted {
			loaded := seg.idx.load(seg.size.Load())
			if !loaded {
				l.logger.Warn("rebuilding damaged index", "segment", segmentName(base))
				if err := seg.idx.reset(); err != nil {
					seg.close()
					l.closeSegments()
					return err
				}
			}
			if serr := l.scanSegment(seg, &prevNext, false, !loaded, last); serr != nil {
				// A trusted segment is damaged after all: recover everything.
				l.logger.Warn("segment below the recovery point is damaged; recovering the whole log",
					"segment", segmentName(base)+logSuffix, "reason", serr.Error())
				seg.close()
				l.closeSegments()
				l.segs = nil
				l.ps.reset()
				l.epochs.entries = nil
				if err := l.epochs.load(); err != nil {
					l.epochs.entries = nil
				}
				return l.load(-1, ckLogStart)
			}
		} else {
			if err := seg.idx.reset(); err != nil {
				seg.close()
				l.closeSegments()
				return err
			}
			if serr := l.scanSegment(seg, &prevNext, true, true, last); serr != nil {
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
// offset and time indexes when rebuild is set (the transaction index too), the producer
// state and the epoch cache. full checks CRCs. *prevNext is the offset after the
// previous batch in the log (−1 at the start); each batch must start at or after it.
func (l *Log) scanSegment(seg *segment, prevNext *int64, full, rebuild, active bool) *scanError {
	seg.resetState()
	sc := scanner{f: seg.log, end: seg.size.Load(), full: full}
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
		if err := l.applyProducer(seg, b, rebuild); err != nil {
			return &scanError{pos, err.Error()}
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

// rebuildProducerState replays every segment's batch headers into a fresh producer
// state (used after truncation; Kafka reloads its producer snapshots instead).
func (l *Log) rebuildProducerState() error {
	l.ps.reset()
	l.fuo.Store(-1)
	for _, seg := range l.segs {
		sc := scanner{f: seg.log, end: seg.size.Load()}
		for {
			b, _, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("%w: %s: %v", ErrCorrupt, seg.path, err)
			}
			if err := l.applyProducer(seg, b, false); err != nil {
				return err
			}
		}
	}
	l.ps.evictBefore(l.logStart.Load())
	l.ps.completeBelow(l.hw.Load())
	l.storeFirstUnstable()
	return nil
}
