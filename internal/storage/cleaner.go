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
// max.compaction.lag.ms, when a retained tombstone's delete horizon has passed, or when
// force is set. Each cleaned record keeps its offset; see docs/compaction.md for the
// retention rules. It holds the log's append lock while it runs.
func (l *Log) Clean(nowMs int64, force bool) (CleanResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return CleanResult{}, ErrClosed
	}
	if !l.cfg.compact() {
		return CleanResult{}, nil
	}
	firstDirty := max(l.cleanedTo, l.logStart.Load())
	end := l.firstUncleanable(firstDirty, nowMs)
	k := 0 // segs[:k] are cleanable
	for k+1 < len(l.segs) && l.segs[k+1].base <= end {
		k++
	}
	if k == 0 {
		return CleanResult{}, nil
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
		return res, nil
	}
	c := &cleaning{l: l, now: nowMs, end: end, keys: map[string]int64{}, lastData: map[int64]int64{},
		horizon: math.MaxInt64}
	for pid, e := range l.ps.producers {
		if b := e.last(); b != nil {
			c.lastData[pid] = b.lastOffset
		}
	}
	segs := append([]*segment(nil), l.segs[:k]...)
	for _, s := range segs {
		s.idx.mu.RLock()
		c.aborted = append(c.aborted, s.idx.aborted...)
		s.idx.mu.RUnlock()
	}
	if err := c.buildOffsetMap(segs, firstDirty); err != nil {
		return res, err
	}
	for _, g := range groupSegments(segs, end, l.cfg.SegmentBytes) {
		if err := c.cleanGroup(g); err != nil {
			return res, err
		}
	}
	res.Cleaned = true
	res.BytesBefore, res.BytesAfter, res.RecordsRemoved = c.before, c.after, c.removed
	l.cleanedTo = end
	l.horizon = 0
	if c.horizon != math.MaxInt64 {
		l.horizon = c.horizon
	}
	l.notify()
	return res, nil
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
func groupSegments(segs []*segment, end, maxBytes int64) [][]*segment {
	var out [][]*segment
	for i := 0; i < len(segs); {
		j, size := i+1, segs[i].size.Load()
		for j < len(segs) {
			next := end
			if j+1 < len(segs) {
				next = segs[j+1].base
			}
			if size+segs[j].size.Load() > maxBytes || next-1-segs[i].base > math.MaxInt32 {
				break
			}
			size += segs[j].size.Load()
			j++
		}
		out = append(out, segs[i:j])
		i = j
	}
	return out
}

// cleaning is the state of one Clean pass (Kafka's Cleaner with its OffsetMap).
type cleaning struct {
	l        *Log
	now, end int64
	keys     map[string]int64 // key → latest offset in the dirty section
	lastData map[int64]int64  // producer ID → last offset of its last data batch
	aborted  []AbortedTxn
	horizon  int64 // earliest delete horizon of a retained tombstone

	before, after, removed int64
}

// isAborted reports whether transactional batch b belongs to an aborted transaction.
func (c *cleaning) isAborted(b record.Batch) bool {
	if !b.IsTransactional() || b.IsControl() {
		return false
	}
	for _, t := range c.aborted {
		if t.ProducerID == b.ProducerID() && t.FirstOffset <= b.BaseOffset() && b.BaseOffset() <= t.LastOffset {
			return true
		}
	}
	return false
}

// buildOffsetMap maps every key of the dirty section [firstDirty, end) to its latest
// offset, skipping control batches and aborted transactions (Kafka's buildOffsetMap).
func (c *cleaning) buildOffsetMap(segs []*segment, firstDirty int64) error {
	for _, s := range segs[c.l.floorSegment(firstDirty):] {
		err := forEachBatch(s, func(b record.Batch, _ int64) error {
			if b.IsControl() || b.LastOffset() < firstDirty || c.isAborted(b) {
				return nil
			}
			recs, err := decodeRecords(b)
			if err != nil {
				return err
			}
			for _, r := range recs {
				if o := b.BaseOffset() + r.offDelta; r.key != nil && o >= firstDirty {
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

// forEachBatch calls fn with every whole, CRC-checked batch of s and its position.
func forEachBatch(s *segment, fn func(b record.Batch, pos int64) error) error {
	sc := scanner{f: s.log, end: s.size.Load(), full: true}
	for {
		b, pos, err := sc.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, s.path, err)
		}
		if err := fn(b, pos); err != nil {
			return err
		}
	}
}

// cleanGroup rewrites the segments of g into one segment based at g[0].base, crash
// safely: .log.cleaned → .log.swap → old segments deleted → .log (Kafka's
// Cleaner.cleanSegments and UnifiedLog.replaceSegments).
func (c *cleaning) cleanGroup(g []*segment) error {
	l := c.l
	path := g[0].path + logSuffix
	f, err := os.OpenFile(path+cleanedSuffix, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 256<<10)
	var written int64
	for gi, s := range g {
		c.before += s.size.Load()
		lastPos := int64(-1)
		if gi == len(g)-1 {
			lastPos = s.size.Load() // the group's last batch is kept, even empty
		}
		err := forEachBatch(s, func(b record.Batch, pos int64) error {
			out, err := c.filterBatch(b, pos+int64(len(b)) == lastPos)
			if err != nil || out == nil {
				return err
			}
			written += int64(len(out))
			_, err = w.Write(out)
			return err
		})
		if err != nil {
			f.Close()
			os.Remove(path + cleanedSuffix)
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	c.after += written
	if err := os.Rename(path+cleanedSuffix, path+swapSuffix); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}

	l.rw.Lock()
	defer l.rw.Unlock()
	var aborted []AbortedTxn
	for _, s := range g {
		s.idx.mu.RLock()
		aborted = append(aborted, s.idx.aborted...)
		s.idx.mu.RUnlock()
		if err := s.remove(); err != nil {
			return err
		}
	}
	if err := os.Rename(path+swapSuffix, path); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	seg, err := openSegment(l.dir, g[0].base)
	if err != nil {
		return err
	}
	if err := l.reindex(seg); err != nil {
		seg.close()
		return err
	}
	for _, t := range aborted {
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
	for i < len(l.segs) && l.segs[i] != g[0] {
		i++
	}
	if i+len(g) > len(l.segs) {
		seg.close()
		return errors.New("storage: cleaned segments vanished from the log")
	}
	l.segs = append(append(append([]*segment(nil), l.segs[:i]...), seg), l.segs[i+len(g):]...)
	return nil
}

// filterBatch returns b as it should be written to the cleaned segment (b itself, a
// rewritten batch, or an empty batch), or nil to drop it (Kafka's
// MemoryRecords.filterTo with the LogCleaner filter). Control batches and batches of
// aborted transactions are kept whole. A record is kept when it has a key, is the
// latest for its key, and is not a tombstone past its batch's delete horizon. A batch
// that retains a tombstone and has no delete horizon gets delete.retention.ms from now.
// A batch left empty is kept as an empty batch when it is the last of an active
// producer (its sequence and epoch) or when keepEmpty is set.
func (c *cleaning) filterBatch(b record.Batch, keepEmpty bool) (record.Batch, error) {
	if b.IsControl() || c.isAborted(b) {
		return b, nil
	}
	recs, err := decodeRecords(b)
	if err != nil {
		return nil, err
	}
	hasHorizon := b.Attributes()&record.DeleteHorizonBit != 0
	pastHorizon := hasHorizon && b.BaseTimestamp() <= c.now
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
	c.removed += int64(len(recs) - len(kept))
	horizon := int64(-1)
	if tombstones {
		horizon = b.BaseTimestamp()
		if !hasHorizon {
			horizon = c.now + c.l.cfg.DeleteRetentionMs
		}
		c.horizon = min(c.horizon, horizon)
	}
	switch {
	case len(kept) == len(recs) && (!tombstones || hasHorizon):
		return b, nil
	case len(kept) == 0:
		if last, ok := c.lastData[b.ProducerID()]; keepEmpty || (b.ProducerID() >= 0 && ok && last == b.LastOffset()) {
			return emptyBatch(b), nil
		}
		return nil, nil
	}
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
// is retried on the next round.
func (m *Manager) RunCleaner(ctx context.Context, backoffMs int64) {
	t := time.NewTicker(time.Duration(max(backoffMs, 1)) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for tp, l := range m.openLogs() {
				if ctx.Err() != nil {
					return
				}
				res, err := l.Clean(now.UnixMilli(), false)
				if err != nil && !errors.Is(err, ErrClosed) {
					m.logger.Error("log cleaning failed", "topic", tp.Topic, "partition", tp.Partition, "err", err)
				} else if res.Cleaned {
					m.logger.Info("cleaned log", "topic", tp.Topic, "partition", tp.Partition,
						"endOffset", res.EndOffset, "dirtyRatio", res.DirtyRatio, "bytesBefore", res.BytesBefore,
						"bytesAfter", res.BytesAfter, "recordsRemoved", res.RecordsRemoved)
				}
			}
		}
	}
}
