package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Producer-state snapshots: Kafka's <offset>.snapshot files (ProducerStateManager
// takeSnapshot/readSnapshot, the ProducerSnapshot message at version 1), each holding the
// producer state after every batch below its offset. Layout, big-endian:
//
//	version int16 (1) | crc uint32 | entries int32 | entries × 46 bytes:
//	producerId int64 | epoch int16 | lastSequence int32 | lastOffset int64 |
//	offsetDelta int32 | timestamp int64 | coordinatorEpoch int32 | currentTxnFirstOffset int64
//
// The CRC-32C covers every byte after it. As in Kafka an entry keeps only the producer's
// last batch (lastOffset −1 when it has none), so after a reload only a retry of that
// batch is found a duplicate.
const (
	snapshotSuffix    = ".snapshot"
	snapshotVersion   = 1
	snapshotCRCAt     = 2                             // Kafka's CRC_OFFSET
	snapshotEntriesAt = snapshotCRCAt + 4             // PRODUCER_ENTRIES_OFFSET: what the CRC covers
	snapshotHeader    = snapshotEntriesAt + 4         // and the entry count
	snapshotEntrySize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8 // one ProducerEntry
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errSnapshot is a snapshot file that fails its checks (Kafka's CorruptSnapshotException).
var errSnapshot = errors.New("corrupt producer snapshot")

func snapshotPath(dir string, offset int64) string {
	return filepath.Join(dir, segmentName(offset)+snapshotSuffix)
}

// encodeSnapshot appends the snapshot of p to buf, producers sorted by ID (pids is
// scratch space). It reports false when p cannot be written: an open transaction whose
// producer has no entry (kept after a MIRROR_PID_RESET until its marker) has no place in
// Kafka's format, so the log keeps its older snapshots instead.
func (p *producerState) encodeSnapshot(buf []byte, pids []int64) ([]byte, []int64, bool) {
	for pid := range p.open {
		if p.producers[pid] == nil {
			return buf, pids, false
		}
	}
	pids = pids[:0]
	for pid := range p.producers {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	buf = binary.BigEndian.AppendUint16(buf[:0], snapshotVersion)
	buf = binary.BigEndian.AppendUint32(buf, 0) // the CRC, below
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(pids)))
	for _, pid := range pids {
		e := p.producers[pid]
		lastSeq, lastOffset, delta := int32(-1), int64(-1), int32(0)
		if m := e.last(); m != nil {
			lastSeq, lastOffset, delta = m.lastSeq, m.lastOffset, int32(m.lastOffset-m.firstOffset)
		}
		txnFirst := int64(-1)
		if o, ok := p.open[pid]; ok {
			txnFirst = o.FirstOffset
		}
		buf = binary.BigEndian.AppendUint64(buf, uint64(pid))
		buf = binary.BigEndian.AppendUint16(buf, uint16(e.epoch))
		buf = binary.BigEndian.AppendUint32(buf, uint32(lastSeq))
		buf = binary.BigEndian.AppendUint64(buf, uint64(lastOffset))
		buf = binary.BigEndian.AppendUint32(buf, uint32(delta))
		buf = binary.BigEndian.AppendUint64(buf, uint64(e.lastTs))
		buf = binary.BigEndian.AppendUint32(buf, uint32(e.coordinatorEpoch))
		buf = binary.BigEndian.AppendUint64(buf, uint64(txnFirst))
	}
	binary.BigEndian.PutUint32(buf[snapshotCRCAt:], crc32.Checksum(buf[snapshotEntriesAt:], castagnoli))
	return buf, pids, true
}

// decodeSnapshot replaces p with the state in data (a snapshot file's bytes). A file that
// fails a check (length, version, CRC, entry values) is errSnapshot and leaves p empty.
func (p *producerState) decodeSnapshot(data []byte) error {
	p.reset()
	if len(data) < snapshotHeader {
		return fmt.Errorf("%w: %d bytes", errSnapshot, len(data))
	}
	if v := int16(binary.BigEndian.Uint16(data)); v != snapshotVersion {
		return fmt.Errorf("%w: version %d", errSnapshot, v)
	}
	if want, got := binary.BigEndian.Uint32(data[snapshotCRCAt:]), crc32.Checksum(data[snapshotEntriesAt:], castagnoli); want != got {
		return fmt.Errorf("%w: CRC %08x, computed %08x", errSnapshot, want, got)
	}
	n := int32(binary.BigEndian.Uint32(data[snapshotEntriesAt:]))
	if n < 0 || int64(len(data)) != snapshotHeader+int64(n)*snapshotEntrySize {
		return fmt.Errorf("%w: %d entries in %d bytes", errSnapshot, n, len(data))
	}
	for b := data[snapshotHeader:]; len(b) > 0; b = b[snapshotEntrySize:] {
		pid := int64(binary.BigEndian.Uint64(b))
		epoch := int16(binary.BigEndian.Uint16(b[8:]))
		lastSeq := int32(binary.BigEndian.Uint32(b[10:]))
		lastOffset := int64(binary.BigEndian.Uint64(b[14:]))
		delta := int32(binary.BigEndian.Uint32(b[22:]))
		ts := int64(binary.BigEndian.Uint64(b[26:]))
		coordEpoch := int32(binary.BigEndian.Uint32(b[34:]))
		txnFirst := int64(binary.BigEndian.Uint64(b[38:]))
		if pid < 0 || p.producers[pid] != nil || delta < 0 || (lastOffset >= 0 && lastOffset < int64(delta)) {
			p.reset()
			return fmt.Errorf("%w: bad entry for producer %d", errSnapshot, pid)
		}
		e := &producerEntry{epoch: epoch, lastTs: ts, coordinatorEpoch: coordEpoch}
		if lastOffset >= 0 {
			e.add(batchMeta{firstSeq: decrementSequence(lastSeq, delta), lastSeq: lastSeq,
				firstOffset: lastOffset - int64(delta), lastOffset: lastOffset, maxTs: ts})
		}
		p.producers[pid] = e
		if txnFirst >= 0 {
			p.open[pid] = OpenTxn{ProducerID: pid, ProducerEpoch: epoch, FirstOffset: txnFirst}
		}
	}
	return nil
}

// decrementSequence is Kafka's DefaultRecordBatch.decrementSequence: sequences wrap from
// MaxInt32 to 0.
func decrementSequence(seq, dec int32) int32 {
	if seq < dec {
		return 1<<31 - 1 - (dec - seq) + 1
	}
	return seq - dec
}

// listSnapshots reads the offsets of the directory's snapshot files into l.snaps.
func (l *Log) listSnapshots() error {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	l.snaps = l.snaps[:0]
	for _, e := range ents {
		stem, ok := strings.CutSuffix(e.Name(), snapshotSuffix)
		if !ok || e.IsDir() || len(stem) != 20 {
			continue
		}
		if off, err := strconv.ParseInt(stem, 10, 64); err == nil && off >= 0 {
			l.snaps = append(l.snaps, off)
		}
	}
	slices.Sort(l.snaps)
	return nil
}

// removeStraySnapshots deletes the snapshots that are not at a segment base, except the
// newest when it is above every base (the one Close wrote), as Kafka's
// ProducerStateManager.removeStraySnapshots does at load.
func (l *Log) removeStraySnapshots(bases []int64) {
	var stray []int64
	for _, off := range l.snaps {
		if _, found := slices.BinarySearch(bases, off); !found {
			stray = append(stray, off)
		}
	}
	if n := len(stray); n > 0 && len(bases) > 0 && stray[n-1] > bases[len(bases)-1] {
		stray = stray[:n-1]
	}
	l.deleteSnapshots(func(off int64) bool { _, found := slices.BinarySearch(stray, off); return found })
}

// deleteSnapshots deletes every snapshot whose offset drop selects; a file that cannot be
// removed is logged and forgotten (the next load lists it again). mu held.
func (l *Log) deleteSnapshots(drop func(offset int64) bool) {
	n := 0
	for _, off := range l.snaps {
		if !drop(off) {
			l.snaps[n] = off
			n++
			continue
		}
		if err := os.Remove(snapshotPath(l.dir, off)); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.logger.Warn("cannot delete producer snapshot", "offset", off, "err", err)
		}
	}
	l.snaps = l.snaps[:n]
	l.unsyncedSnaps = slices.DeleteFunc(l.unsyncedSnaps, drop)
}

// takeSnapshot writes the producer state as the snapshot at offset (the state after
// every batch below it), unless one exists there already or the state cannot be written
// (encodeSnapshot). With sync it is durable before it returns; otherwise the next flush
// makes it so (Kafka syncs a roll's snapshot with the segment's flush). A failure is
// logged: the log falls back to an older snapshot or a replay. mu held.
func (l *Log) takeSnapshot(offset int64, sync bool) {
	if _, exists := slices.BinarySearch(l.snaps, offset); exists {
		return
	}
	var ok bool
	if l.snapBuf, l.snapPIDs, ok = l.ps.encodeSnapshot(l.snapBuf, l.snapPIDs); !ok {
		l.logger.Debug("producer snapshot skipped: an open transaction has no producer entry", "offset", offset)
		return
	}
	if err := writeFileAtomic(snapshotPath(l.dir, offset), l.snapBuf, sync); err != nil {
		l.logger.Warn("cannot write producer snapshot", "offset", offset, "err", err)
		return
	}
	i, _ := slices.BinarySearch(l.snaps, offset)
	l.snaps = slices.Insert(l.snaps, i, offset)
	if !sync {
		l.unsyncedSnaps = append(l.unsyncedSnaps, offset)
	}
}

// syncSnapshots makes the snapshots written without sync durable (flushLocked). mu held.
func (l *Log) syncSnapshots() error {
	for _, off := range l.unsyncedSnaps {
		f, err := os.Open(snapshotPath(l.dir, off))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	l.unsyncedSnaps = l.unsyncedSnaps[:0]
	return nil
}

// loadSnapshot replaces the producer state with the newest readable snapshot at or below
// limit and returns its offset; −1 and an empty state when there is none. A snapshot
// that fails its checks is logged at WARN and deleted, and the next older one tried, as
// Kafka's loadFromSnapshot does. mu held (or the log not yet published).
func (l *Log) loadSnapshot(limit int64) int64 {
	for i := len(l.snaps) - 1; i >= 0; i-- {
		off := l.snaps[i]
		if off > limit {
			continue
		}
		data, err := os.ReadFile(snapshotPath(l.dir, off))
		if err == nil {
			if err = l.ps.decodeSnapshot(data); err == nil {
				return off
			}
		}
		l.logger.Warn("ignoring unreadable producer snapshot", "file", segmentName(off)+snapshotSuffix, "err", err)
		l.deleteSnapshots(func(o int64) bool { return o == off })
	}
	l.ps.reset()
	return -1
}
