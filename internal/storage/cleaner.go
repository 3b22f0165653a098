package storage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/record"
)

// File suffixes of a segment being cleaned, as in Kafka's LogFileUtils: the cleaner
// writes <base>.log.cleaned, renames it to <base>.log.swap once complete and durable,
// deletes the segments it replaces, then renames it to <base>.log.
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// Byte positions of v2 batch header fields the cleaner rewrites (Kafka's
// DefaultRecordBatch layout).
const (
	hdrLength        = 8
	hdrAttributes    = 21
	hdrBaseTimestamp = 27
	hdrMaxTimestamp  = 35
	hdrRecordCount   = 57
)

// CleanResult reports one Clean pass. Cleaned is false when the log was not compacted
// (policy, nothing cleanable, or below min.cleanable.dirty.ratio). Offsets are
// [FirstDirty, EndOffset): the dirty section whose keys were mapped; every segment
// below EndOffset was rewritten. Bytes are .log sizes of the rewritten segments.
type CleanResult struct {
	Cleaned                 bool
	FirstDirty, EndOffset   int64
	DirtyRatio              float64
	BytesBefore, BytesAfter int64
	RecordsRemoved          int64
}

// Clean compacts the log once when cleanup.policy includes compact (Kafka's
// LogCleaner: LogCleanerManager.grabFilthiestCompactedLog + Cleaner.clean). The
// cleanable section ends at the first uncleanable offset: the active segment, the last
// stable offset (open transactions, the high watermark) and the first segment holding
// records younger than min.compaction.lag.ms, rounded down to a segment boundary. It
// runs when the dirty ratio (dirty bytes / cleanable bytes) reaches
// min.cleanable.dirty.ratio, when the first dirty segment is older than
// max.compaction.lag.ms, when a retained tombstone's or marker's delete horizon has
// passed, or when force is set. Each cleaned record keeps its offset; batches of
// aborted transactions and, after delete.retention.ms, the markers of transactions with
// no data left are removed; see docs/compaction.md for the retention rules. The log's
// append lock is held to plan the pass and to swap each cleaned segment group in, not
// while segments are read and written: a truncation or segment deletion meanwhile
// abandons the rest of the pass (Cleaned false, no error; the groups already swapped
// stay), as Kafka's abortAndPauseCleaning.
func (l *Log) Clean(nowMs int64, force bool) (CleanResult, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	c, res, err := l.planClean(nowMs, force)
	if c == nil || err != nil {
		return res, err
	}
	defer c.release()
	groups, err := c.clean()
	defer func() {
		for _, g := range groups {
			os.Remove(g.path + cleanedSuffix) // left only by a failed or abandoned pass
		}
	}()
	if err != nil {
		if ok, lerr := c.stillPlanned(); !ok || lerr != nil {
			return res, lerr // abandoned: a truncation or deletion made the error moot
		}
		return res, err
	}
	// Each group is swapped in under the lock on its own, as Kafka's replaceSegments, so
	// an append waits for one group's swap at most.
	for _, g := range groups {
		if ok, err := c.swapLocked(g); !ok || err != nil {
			return res, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok, err := c.stillPlannedLocked(); !ok || err != nil {
		return res, err // truncated after the last swap: the truncation set the checkpoint
	}
	res.Cleaned = true
	res.BytesBefore, res.BytesAfter, res.RecordsRemoved = c.before, c.after, c.removed
	l.cleanedTo.Store(c.end)
	l.horizon = 0
	if c.horizon != math.MaxInt64 {
		l.horizon = c.horizon
	}
	l.notify()
	return res, nil
}

// planClean decides, under the append lock, whether and what to clean, and returns the
// pass holding a reference to each cleanable segment's file (nil when not cleaning).
func (l *Log) planClean(nowMs int64, force bool) (*cleaning, CleanResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil, CleanResult{}, ErrClosed
	}
	if !l.cfg.compact() {
		return nil, CleanResult{}, nil
	}
	firstDirty := max(l.cleanedTo.Load(), l.logStart.Load())
	end := l.firstUncleanable(firstDirty, nowMs)
	k := 0 // segs[:k] are cleanable
	for k+1 < len(l.segs) && l.segs[k+1].base <= end {
		k++
	}
	if k == 0 {
		return nil, CleanResult{}, nil
	}
	end = l.segs[k].base
	res := CleanResult{FirstDirty: min(firstDirty, end), EndOffset: end}
	var cleanBytes, dirtyBytes int64
	firstDirtyTs := int64(-1)
	for i, s := range l.segs[:k] {
		if l.segs[i+1].base <= firstDirty {
			cleanBytes += s.size.Load()
		} else {
			dirtyBytes += s.size.Load()
			if firstDirtyTs < 0 {
				firstDirtyTs = s.firstBatchTs
			}
		}
	}
	if cleanBytes+dirtyBytes > 0 {
		res.DirtyRatio = float64(dirtyBytes) / float64(cleanBytes+dirtyBytes)
	}
	due := dirtyBytes > 0 && (res.DirtyRatio >= l.cfg.MinCleanableDirtyRatio ||
		(firstDirtyTs >= 0 && nowMs-firstDirtyTs > l.cfg.MaxCompactionLagMs))
	if !force && !due && (l.horizon == 0 || l.horizon > nowMs) {
		return nil, res, nil
	}
	c := &cleaning{l: l, gen: l.segsGen, now: nowMs, firstDirty: firstDirty, end: end,
		deleteRetentionMs: l.cfg.DeleteRetentionMs, segmentBytes: l.cfg.SegmentBytes,
		keys: map[string]int64{}, lastRecords: map[int64]lastRecord{}, horizon: math.MaxInt64}
	for pid, e := range l.ps.producers {
		lr := lastRecord{dataOffset: -1, epoch: e.epoch}
		if b := e.last(); b != nil {
			lr.dataOffset = b.lastOffset
		}
		c.lastRecords[pid] = lr
	}
	// Every aborted transaction that may hold data below end, wherever its marker is
	// (Kafka's collectAbortedTransactions searches past the cleaned segments too).
	for _, s := range l.segs {
		s.idx.mu.RLock()
		for _, t := range s.idx.aborted {
			if t.FirstOffset < end {
				c.aborted = append(c.aborted, t)
			}
		}
		s.idx.mu.RUnlock()
	}
	sort.Slice(c.aborted, func(i, j int) bool { return c.aborted[i].FirstOffset < c.aborted[j].FirstOffset })
	l.rw.RLock()
	for _, s := range l.segs[:k] {
		// a range reference: a truncation meanwhile writes a new file (copy-on-truncate)
		s.file.acquireRange()
		c.segs = append(c.segs, cleanSource{seg: s, f: s.log, ref: s.file, size: s.size.Load()})
	}
	l.rw.RUnlock()
	return c, res, nil
}

// firstUncleanable is Kafka's LogCleanerManager.cleanableOffsets upper bound: the
// active segment's base, the last stable offset (so never past the high watermark), and
// the base of the first dirty segment with a record newer than min.compaction.lag.ms.
func (l *Log) firstUncleanable(firstDirty, nowMs int64) int64 {
	_, lso := l.HighWatermarkAndLSO()
	u := min(l.active().base, lso)
	if l.cfg.MinCompactionLagMs > 0 {
		for _, s := range l.segs[l.floorSegment(firstDirty) : len(l.segs)-1] {
			s.idx.mu.RLock()
			ts := s.maxTs
			s.idx.mu.RUnlock()
			if ts > nowMs-l.cfg.MinCompactionLagMs {
				u = min(u, s.base)
				break
			}
		}
	}
	return u
}

// groupSegments is Kafka's Cleaner.groupSegmentsBySize: consecutive segments whose
// total size fits segment.bytes and whose offsets fit one segment's int32 relative
// offsets. end bounds the last segment's offsets.
func groupSegments(segs []cleanSource, end, maxBytes int64) [][]cleanSource {
	var out [][]cleanSource
	for i := 0; i < len(segs); {
		j, size := i+1, segs[i].size
		for j < len(segs) {
			next := end
			if j+1 < len(segs) {
				next = segs[j+1].seg.base
			}
			if size+segs[j].size > maxBytes || next-1-segs[i].seg.base > math.MaxInt32 {
				break
			}
			size += segs[j].size
			j++
		}
		out = append(out, segs[i:j])
		i = j
	}
	return out
}

// cleanSource is a cleanable segment as the pass reads it: its .log file, held by a
// reference taken under the append lock, and its size then.
type cleanSource struct {
	seg  *segment
	f    *os.File
	ref  *segFile
	size int64
}

// forEachBatch calls fn with every whole, CRC-checked batch of the source and its
// position.
func (s cleanSource) forEachBatch(fn func(b record.Batch, pos int64) error) error {
	sc := scanner{f: s.f, end: s.size, full: true}
	for {
		b, pos, err := sc.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, s.seg.path, err)
		}
		if err := fn(b, pos); err != nil {
			return err
		}
	}
}

// lastRecord is what the cleaner keeps of an active producer (Kafka's LastRecord): the
// last offset of its last data batch (−1 when it has none) and its epoch.
type lastRecord struct {
	dataOffset int64
	epoch      int16
}

// cleaning is the state of one Clean pass (Kafka's Cleaner with its OffsetMap). Its
// fields are set under the append lock by planClean and read off-lock by clean.
type cleaning struct {
	l                 *Log
	gen               uint64 // Log.segsGen when planned
	now               int64
	firstDirty, end   int64
	deleteRetentionMs int64
	segmentBytes      int64
	segs              []cleanSource
	keys              map[string]int64     // key → latest offset in the dirty section
	lastRecords       map[int64]lastRecord // producer ID → its last batch, when planned
	aborted           []AbortedTxn         // aborted transactions starting below end, by first offset
	horizon           int64                // earliest delete horizon of a retained tombstone or marker

	before, after, removed int64
}

// cleanedGroup is one segment group cleaned into <path>.log.cleaned, with the entries
// of its transaction index.
type cleanedGroup struct {
	segs    []cleanSource
	path    string // the first segment's path, without suffix
	aborted []AbortedTxn
}

// release drops the pass's references to the segment files.
func (c *cleaning) release() {
	for _, s := range c.segs {
		s.ref.release()
	}
}

// clean builds the offset map and writes every group's cleaned segment, off the append
// lock. It returns the groups written so far, even on error.
func (c *cleaning) clean() ([]cleanedGroup, error) {
	if err := c.buildOffsetMap(); err != nil {
		return nil, err
	}
	var out []cleanedGroup
	for _, g := range groupSegments(c.segs, c.end, c.segmentBytes) {
		cg := cleanedGroup{segs: g, path: g[0].seg.path}
		out = append(out, cg)
		aborted, err := c.cleanInto(g)
		if err != nil {
			return out, err
		}
		out[len(out)-1].aborted = aborted
	}
	return out, nil
}

// abortedSince returns the aborted transactions of c.aborted that may hold data in
// [from, to): their marker at or after from (Kafka's TransactionIndex.collectAbortedTxns).
func (c *cleaning) abortedSince(from, to int64) []AbortedTxn {
	var out []AbortedTxn
	for _, t := range c.aborted {
		if t.LastOffset >= from && t.FirstOffset < to {
			out = append(out, t)
		}
	}
	return out
}

// buildOffsetMap maps every key of the dirty section [firstDirty, end) to its latest
// offset, skipping control batches and aborted transactions (Kafka's buildOffsetMap).
func (c *cleaning) buildOffsetMap() error {
	first := 0
	for first+1 < len(c.segs) && c.segs[first+1].seg.base <= c.firstDirty {
		first++
	}
	txns := newTxnCleaning(c.abortedSince(c.segs[first].seg.base, c.end))
	for _, s := range c.segs[first:] {
		err := s.forEachBatch(func(b record.Batch, _ int64) error {
			if b.IsControl() {
				txns.onControl(b)
				return nil
			}
			if txns.onData(b) || b.LastOffset() < c.firstDirty {
				return nil
			}
			recs, err := decodeRecords(b)
			if err != nil {
				return err
			}
			for _, r := range recs {
				if o := b.BaseOffset() + r.offDelta; r.key != nil && o >= c.firstDirty {
					c.keys[string(r.key)] = o
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// txnCleaning is Kafka's CleanedTransactionMetadata: the transactions a segment group
// is inside of while it is read in offset order, which tells the batches of aborted
// transactions (discarded) and the markers whose transaction has no data left in the
// group (discardable once their delete horizon passes).
type txnCleaning struct {
	pending          []AbortedTxn             // aborted transactions not reached yet, by first offset
	ongoingAborted   map[int64]*abortedInPass // producer ID → its aborted transaction reached
	ongoingCommitted map[int64]bool           // producers with data of a non-aborted transaction read
	kept             []AbortedTxn             // aborted transactions whose marker stays with data: the cleaned .txnindex
}

// abortedInPass is an aborted transaction reached by the pass, and whether a batch of
// it was read (Kafka's AbortedTransactionMetadata.lastObservedBatchOffset).
type abortedInPass struct {
	txn  AbortedTxn
	seen bool
}

func newTxnCleaning(aborted []AbortedTxn) *txnCleaning {
	return &txnCleaning{pending: aborted, ongoingAborted: map[int64]*abortedInPass{}, ongoingCommitted: map[int64]bool{}}
}

// reach makes the aborted transactions starting at or below offset ongoing.
func (t *txnCleaning) reach(offset int64) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= offset {
		a := t.pending[0]
		t.pending = t.pending[1:]
		if t.ongoingAborted[a.ProducerID] == nil {
			t.ongoingAborted[a.ProducerID] = &abortedInPass{txn: a}
		}
	}
}

// onData reads data batch b and reports whether it belongs to an aborted transaction
// (Kafka's onBatchRead).
func (t *txnCleaning) onData(b record.Batch) bool {
	t.reach(b.LastOffset())
	if !b.IsTransactional() {
		return false
	}
	if a := t.ongoingAborted[b.ProducerID()]; a != nil {
		a.seen = true
		return true
	}
	t.ongoingCommitted[b.ProducerID()] = true
	return false
}

// onControl reads control batch b and reports whether it may be discarded: an ABORT
// marker none of whose transaction's batches was read, a COMMIT marker likewise, or a
// marker already emptied (Kafka's onControlBatchRead). An ABORT marker kept for its
// data keeps its transaction-index entry.
func (t *txnCleaning) onControl(b record.Batch) bool {
	t.reach(b.LastOffset())
	if b.RecordCount() == 0 {
		return true
	}
	typ, err := b.ControlType()
	if err != nil {
		return false
	}
	pid := b.ProducerID()
	switch typ {
	case record.ControlAbort:
		a := t.ongoingAborted[pid]
		delete(t.ongoingAborted, pid)
		if a != nil && a.seen {
			t.kept = append(t.kept, a.txn)
			return false
		}
		return true
	case record.ControlCommit:
		seen := t.ongoingCommitted[pid]
		delete(t.ongoingCommitted, pid)
		return !seen
	}
	return false
}

// cleanInto writes the cleaned segments of g into <g[0]>.log.cleaned, fsynced, and
// returns the cleaned segment's aborted transactions (Kafka's Cleaner.cleanSegments).
func (c *cleaning) cleanInto(g []cleanSource) ([]AbortedTxn, error) {
	path := g[0].seg.path + logSuffix + cleanedSuffix
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	next := c.end
	if last := g[len(g)-1]; last.seg != c.segs[len(c.segs)-1].seg {
		for i, s := range c.segs {
			if s.seg == last.seg {
				next = c.segs[i+1].seg.base
			}
		}
	}
	txns := newTxnCleaning(c.abortedSince(g[0].seg.base, next))
	w := bufio.NewWriterSize(f, 256<<10)
	var written int64
	for gi, s := range g {
		c.before += s.size
		lastPos := int64(-1)
		if gi == len(g)-1 {
			lastPos = s.size // the group's last batch is kept, even empty
		}
		err := s.forEachBatch(func(b record.Batch, pos int64) error {
			out, err := c.filterBatch(b, txns, pos+int64(len(b)) == lastPos)
			if err != nil || out == nil {
				return err
			}
			written += int64(len(out))
			_, err = w.Write(out)
			return err
		})
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	c.after += written
	return txns.kept, nil
}

// stillPlanned reports, under the append lock, whether the log is as the pass planned
// it (no truncation or segment deletion since); ErrClosed once the log is closed.
func (c *cleaning) stillPlanned() (bool, error) {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.stillPlannedLocked()
}

func (c *cleaning) stillPlannedLocked() (bool, error) {
	if c.l.closed.Load() {
		return false, ErrClosed
	}
	return c.l.segsGen == c.gen, nil
}

// swapLocked takes the append lock and swaps g in, when the log is still as planned;
// false when it is not (the pass is abandoned).
func (c *cleaning) swapLocked(g cleanedGroup) (bool, error) {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if ok, err := c.stillPlannedLocked(); !ok || err != nil {
		return false, err
	}
	return true, c.swap(g)
}

// swap replaces the segments of g by their cleaned segment, crash safely: .log.cleaned
// → .log.swap → old segments deleted → .log, then indexes rebuilt and the kept
// aborted transactions written to its .txnindex (Kafka's UnifiedLog.replaceSegments).
// The append lock is held and the segments are still the log's.
func (c *cleaning) swap(g cleanedGroup) error {
	l := c.l
	path := g.path + logSuffix
	if err := os.Rename(path+cleanedSuffix, path+swapSuffix); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	l.rw.Lock()
	defer l.rw.Unlock()
	for _, s := range g.segs {
		if err := s.seg.remove(); err != nil {
			return err
		}
	}
	if err := os.Rename(path+swapSuffix, path); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	base := g.segs[0].seg.base
	seg, err := openSegment(l.dir, base)
	if err != nil {
		return err
	}
	if err := l.reindex(seg); err != nil {
		seg.close()
		return err
	}
	for _, t := range g.aborted {
		if err := seg.idx.appendAborted(t); err != nil {
			seg.close()
			return err
		}
	}
	if err := seg.finishTimeIndex(); err != nil {
		seg.close()
		return err
	}
	if err := seg.sync(); err != nil {
		seg.close()
		return err
	}
	i := 0
	for i < len(l.segs) && l.segs[i] != g.segs[0].seg {
		i++
	}
	if i+len(g.segs) > len(l.segs) {
		seg.close()
		return errors.New("storage: cleaned segments vanished from the log")
	}
	l.segs = append(append(append([]*segment(nil), l.segs[:i]...), seg), l.segs[i+len(g.segs):]...)
	return nil
}

// lastOfProducer reports whether b must stay (emptied if need be) to keep its
// producer's state: it holds the last data of an active producer, or it is the marker
// of the producer's current epoch when the producer has no data left (Kafka's
// isBatchLastRecordOfProducer).
func (c *cleaning) lastOfProducer(b record.Batch) bool {
	if b.ProducerID() < 0 {
		return false
	}
	lr, ok := c.lastRecords[b.ProducerID()]
	if !ok {
		return false
	}
	if lr.dataOffset >= 0 {
		return b.LastOffset() == lr.dataOffset
	}
	return b.IsControl() && b.ProducerEpoch() == lr.epoch
}

// filterBatch returns b as it should be written to the cleaned segment (b itself, a
// rewritten batch, or an empty batch), or nil to drop it (Kafka's
// MemoryRecords.filterTo with the LogCleaner filter, Cleaner.cleanInto):
//   - a batch of an aborted transaction loses its records;
//   - a marker whose transaction has no batch left in the group gets a delete horizon
//     of delete.retention.ms from now and, once that has passed, loses its record;
//     other control batches are kept whole;
//   - a data record is kept when it has a key, is the latest for its key, and is not a
//     tombstone past its batch's delete horizon; a batch that retains a tombstone and
//     has no delete horizon gets delete.retention.ms from now.
//
// A batch left without records is kept as an empty batch when it is its producer's last
// (lastOfProducer) or keepEmpty is set (the group's last batch), else dropped.
func (c *cleaning) filterBatch(b record.Batch, txns *txnCleaning, keepEmpty bool) (record.Batch, error) {
	hasHorizon := b.Attributes()&record.DeleteHorizonBit != 0
	pastHorizon := hasHorizon && b.BaseTimestamp() <= c.now
	keepEmpty = keepEmpty || c.lastOfProducer(b)
	empty := func(n int64) record.Batch {
		c.removed += n
		if keepEmpty {
			return emptyBatch(b)
		}
		return nil
	}
	if b.IsControl() {
		if !txns.onControl(b) {
			return b, nil
		}
		if b.RecordCount() == 0 {
			return empty(0), nil // emptied by an earlier pass
		}
		if pastHorizon {
			return empty(int64(b.RecordCount())), nil
		}
		if hasHorizon {
			c.horizon = min(c.horizon, b.BaseTimestamp())
			return b, nil
		}
		recs, err := decodeRecords(b)
		if err != nil {
			return nil, err
		}
		horizon := c.now + c.deleteRetentionMs
		c.horizon = min(c.horizon, horizon)
		return rebuildBatch(b, recs, horizon)
	}
	if txns.onData(b) {
		return empty(int64(b.RecordCount())), nil
	}
	recs, err := decodeRecords(b)
	if err != nil {
		return nil, err
	}
	kept := recs[:0:0]
	tombstones := false
	for _, r := range recs {
		off := b.BaseOffset() + r.offDelta
		if r.key == nil {
			continue
		}
		if latest, ok := c.keys[string(r.key)]; ok && off < latest {
			continue
		}
		if r.valueNull {
			if pastHorizon {
				continue
			}
			tombstones = true
		}
		kept = append(kept, r)
	}
	horizon := int64(-1)
	if tombstones {
		horizon = b.BaseTimestamp()
		if !hasHorizon {
			horizon = c.now + c.deleteRetentionMs
		}
		c.horizon = min(c.horizon, horizon)
	}
	switch {
	case len(kept) == 0:
		return empty(int64(len(recs))), nil
	case len(kept) == len(recs) && (!tombstones || hasHorizon):
		return b, nil
	}
	c.removed += int64(len(recs) - len(kept))
	return rebuildBatch(b, kept, horizon)
}

// rawRecord is one decoded record of a batch: its timestamp (absolute), offset delta,
// key (nil for null), whether the value is null, and its raw bytes from the key on
// (key, value and headers, re-used as they are).
type rawRecord struct {
	attr      byte
	ts        int64
	offDelta  int64
	key       []byte
	valueNull bool
	tail      []byte
}

// decodeRecords decompresses b if needed and splits its records (Kafka's
// DefaultRecord layout).
func decodeRecords(b record.Batch) ([]rawRecord, error) {
	out := make([]rawRecord, 0, max(0, min(int(b.RecordCount()), len(b))))
	it := record.IterRecords(b)
	for it.Next() {
		r := it.Record()
		out = append(out, rawRecord{attr: byte(r.Attributes), ts: b.BaseTimestamp() + r.TimestampDelta,
			offDelta: r.OffsetDelta, key: r.Key, valueNull: r.Value == nil, tail: r.Body})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return out, nil
}

// rebuildBatch re-encodes b holding only recs, as Kafka's buildRetainedRecordsInto: the
// same base offset, last offset delta (so the producer's last sequence survives),
// producer fields, leader epoch and codec; the base timestamp is the delete horizon when
// horizon >= 0 (attribute hasDeleteHorizonMs, KIP-534), else the first record's
// timestamp; the max timestamp is recomputed unless it is LogAppendTime.
func rebuildBatch(b record.Batch, recs []rawRecord, horizon int64) (record.Batch, error) {
	attrs := b.Attributes() &^ record.DeleteHorizonBit
	baseTs := recs[0].ts
	if horizon >= 0 {
		baseTs = horizon
		attrs |= record.DeleteHorizonBit
	}
	maxTs := b.MaxTimestamp()
	if !b.LogAppendTime() {
		maxTs = recs[0].ts
		for _, r := range recs {
			maxTs = max(maxTs, r.ts)
		}
	}
	var body []byte
	var tmp [2 * binary.MaxVarintLen64]byte
	for _, r := range recs {
		n := binary.PutVarint(tmp[:], r.ts-baseTs)
		n += binary.PutVarint(tmp[n:], r.offDelta)
		body = binary.AppendVarint(body, int64(1+n+len(r.tail)))
		body = append(body, r.attr)
		body = append(body, tmp[:n]...)
		body = append(body, r.tail...)
	}
	if codec := b.Compression(); codec != 0 {
		comp, err := compressorFor(codec)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		out, used := comp.Compress(&buf, body)
		if used != kgo.CompressionCodecType(codec) || out == nil {
			return nil, fmt.Errorf("storage: recompressing batch at offset %d with codec %d failed", b.BaseOffset(), codec)
		}
		body = append([]byte(nil), out...)
	}
	nb := make(record.Batch, record.HeaderSize+len(body))
	copy(nb, b[:record.HeaderSize])
	copy(nb[record.HeaderSize:], body)
	binary.BigEndian.PutUint32(nb[hdrLength:], uint32(len(nb)-record.LogOverhead))
	binary.BigEndian.PutUint16(nb[hdrAttributes:], uint16(attrs))
	binary.BigEndian.PutUint64(nb[hdrBaseTimestamp:], uint64(baseTs))
	binary.BigEndian.PutUint64(nb[hdrMaxTimestamp:], uint64(maxTs))
	binary.BigEndian.PutUint32(nb[hdrRecordCount:], uint32(len(recs)))
	nb.UpdateCRC()
	return nb, nil
}

// emptyBatch is b's header with no records (Kafka's BatchRetention.RETAIN_EMPTY and
// DefaultRecordBatch.writeEmptyHeader): offsets, sequences, producer and timestamps
// are kept, compression is dropped.
func emptyBatch(b record.Batch) record.Batch {
	nb := make(record.Batch, record.HeaderSize)
	copy(nb, b[:record.HeaderSize])
	attrs := b.Attributes() &^ (record.CompressionMask | record.DeleteHorizonBit)
	binary.BigEndian.PutUint32(nb[hdrLength:], uint32(record.HeaderSize-record.LogOverhead))
	binary.BigEndian.PutUint16(nb[hdrAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(nb[hdrRecordCount:], 0)
	nb.UpdateCRC()
	return nb
}

// compressors caches franz-go's compressor per codec (they pool their encoders).
var compressors sync.Map // int8 → kgo.Compressor

// compressorFor returns franz-go's compressor for a batch codec (1 gzip, 2 snappy,
// 3 lz4, 4 zstd).
func compressorFor(codec int8) (kgo.Compressor, error) {
	if c, ok := compressors.Load(codec); ok {
		return c.(kgo.Compressor), nil
	}
	var cc kgo.CompressionCodec
	switch codec {
	case 1:
		cc = kgo.GzipCompression()
	case 2:
		cc = kgo.SnappyCompression()
	case 3:
		cc = kgo.Lz4Compression()
	case 4:
		cc = kgo.ZstdCompression()
	default:
		return nil, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, codec)
	}
	c, err := kgo.DefaultCompressor(cc)
	if err != nil {
		return nil, err
	}
	compressors.Store(codec, c)
	return c, nil
}

// completeSwaps finishes cleanings interrupted by a crash, as Kafka's LogLoader does
// with .cleaned and .swap files: a .cleaned file is incomplete and deleted; a .swap
// file is a complete, durable cleaned segment, so the segments whose base offsets lie
// in its offset range are deleted and it is renamed to .log (its indexes are rebuilt
// by recovery).
func completeSwaps(dir string, logger interface{ Warn(string, ...any) }) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var swaps []string
	for _, e := range ents {
		name := e.Name()
		switch filepath.Ext(name) {
		case cleanedSuffix:
			logger.Warn("deleting incomplete cleaned segment", "file", name)
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
		case swapSuffix:
			swaps = append(swaps, name)
		}
	}
	for _, name := range swaps {
		logName := name[:len(name)-len(swapSuffix)]
		if filepath.Ext(logName) != logSuffix || len(logName) != 20+len(logSuffix) {
			os.Remove(filepath.Join(dir, name))
			continue
		}
		var base int64
		if _, err := fmt.Sscanf(logName[:20], "%d", &base); err != nil {
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		next := base
		sc := scanner{f: f, end: st.Size()}
		for {
			b, _, err := sc.next()
			if err != nil {
				break
			}
			next = b.NextOffset()
		}
		f.Close()
		logger.Warn("completing interrupted segment swap", "file", name, "baseOffset", base, "nextOffset", next)
		for _, e := range ents {
			n := e.Name()
			ext := filepath.Ext(n)
			if len(n) != 20+len(ext) || (ext != logSuffix && ext != indexSuffix && ext != timeIndexSuffix && ext != txnIndexSuffix) {
				continue
			}
			var b int64
			if _, err := fmt.Sscanf(n[:20], "%d", &b); err != nil || b < base || (b >= next && b != base) {
				continue
			}
			if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, logName)); err != nil {
			return err
		}
	}
	if len(swaps) > 0 {
		return syncDir(dir)
	}
	return nil
}

// RunCleaner runs Clean on every open log whose cleanup.policy includes compact, then
// sleeps backoffMs (log.cleaner.backoff.ms), until ctx is done (Kafka's
// CleanerThread). Cleaning results are logged at INFO, failures at ERROR; a failed log
// is retried on the next round. A round that cleaned a log writes
// cleaner-offset-checkpoint.
func (m *Manager) RunCleaner(ctx context.Context, backoffMs int64) {
	t := time.NewTicker(time.Duration(max(backoffMs, 1)) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			logs, cleaned := m.openLogs(), false
			for tp, l := range logs {
				if ctx.Err() != nil {
					return
				}
				res, err := l.Clean(now.UnixMilli(), false)
				if err != nil && !errors.Is(err, ErrClosed) {
					m.logger.Error("log cleaning failed", "topic", tp.Topic, "partition", tp.Partition, "err", err)
				} else if res.Cleaned {
					cleaned = true
					m.logger.Info("cleaned log", "topic", tp.Topic, "partition", tp.Partition,
						"endOffset", res.EndOffset, "dirtyRatio", res.DirtyRatio, "bytesBefore", res.BytesBefore,
						"bytesAfter", res.BytesAfter, "recordsRemoved", res.RecordsRemoved)
				}
			}
			if cleaned {
				if err := m.checkpointCleanerOffsets(logs); err != nil {
					m.logger.Error("writing the cleaner checkpoint", "err", err)
				}
			}
		}
	}
}
