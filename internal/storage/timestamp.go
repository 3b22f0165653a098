package storage

import (
	"fmt"
	"io"

	"github.com/kmirror/kmirror/internal/record"
)

// OffsetForTimestamp returns the offset and timestamp of the first record at or after
// the log start whose timestamp is >= ts (ListOffsets by timestamp, Kafka's
// UnifiedLog.fetchOffsetByTimestamp), decoding inside compressed batches; found is false
// when ts is past the last record.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, found bool, err error) {
	l.rw.RLock()
	defer l.rw.RUnlock()
	if l.closed.Load() {
		return 0, 0, false, ErrClosed
	}
	start := l.logStart.Load()
	for _, seg := range l.segs {
		seg.idx.mu.RLock()
		segMax := seg.maxTs
		seg.idx.mu.RUnlock()
		if segMax < ts {
			continue
		}
		pos := int64(0)
		if rel, ok := seg.idx.lookupTime(ts); ok {
			pos = int64(seg.idx.lookup(rel))
		}
		sc := scanner{f: seg.log, pos: pos, end: seg.size.Load()}
		for {
			b, _, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, 0, false, fmt.Errorf("%w: %s: %v", ErrCorrupt, seg.path, err)
			}
			if b.MaxTimestamp() < ts || b.LastOffset() < start {
				continue
			}
			whole, err := readWhole(seg, sc.pos-int64(b.Size()), b.Size())
			if err != nil {
				return 0, 0, false, err
			}
			o, t, ok, err := findRecord(whole, ts, start)
			if err != nil {
				return 0, 0, false, err
			}
			if ok {
				return o, t, true, nil
			}
		}
	}
	return -1, -1, false, nil
}

// MaxTimestamp returns the offset and timestamp of the first record carrying the log's
// largest timestamp (ListOffsets MAX_TIMESTAMP, KIP-734), or −1, −1 for an empty log.
func (l *Log) MaxTimestamp() (offset int64, timestamp int64) {
	l.rw.RLock()
	defer l.rw.RUnlock()
	var best *segment
	bestTs, bestPos := int64(-1), int64(0)
	for _, seg := range l.segs {
		seg.idx.mu.RLock()
		if seg.maxTs > bestTs && seg.size.Load() > 0 {
			best, bestTs, bestPos = seg, seg.maxTs, seg.maxTsPos
		}
		seg.idx.mu.RUnlock()
	}
	if best == nil || l.closed.Load() {
		return -1, -1
	}
	var hdr [record.HeaderSize]byte
	if _, err := best.log.ReadAt(hdr[:], bestPos); err != nil {
		return -1, -1
	}
	whole, err := readWhole(best, bestPos, record.Batch(hdr[:]).Size())
	if err != nil {
		return -1, -1
	}
	if o, t, ok, err := findRecord(whole, bestTs, -1); err == nil && ok && t == bestTs {
		return o, t
	}
	return record.Batch(whole).LastOffset(), bestTs
}

func readWhole(seg *segment, pos int64, size int) (record.Batch, error) {
	buf := make([]byte, size)
	if _, err := seg.log.ReadAt(buf, pos); err != nil {
		return nil, err
	}
	return record.Batch(buf), nil
}

// findRecord decodes batch b and returns the first record with timestamp >= ts and
// offset >= minOffset. With LogAppendTime every record has the batch's max timestamp.
func findRecord(b record.Batch, ts, minOffset int64) (int64, int64, bool, error) {
	if b.Check() != nil {
		return 0, 0, false, fmt.Errorf("%w: batch at offset %d", ErrCorrupt, b.BaseOffset())
	}
	it := record.IterRecords(b)
	for it.Next() {
		if r := it.Record(); r.Timestamp >= ts && r.Offset >= minOffset {
			return r.Offset, r.Timestamp, true, nil
		}
	}
	if err := it.Err(); err != nil {
		return 0, 0, false, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return 0, 0, false, nil
}
