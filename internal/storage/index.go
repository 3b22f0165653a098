package storage

import (
	"encoding/binary"
	"errors"
	"os"
	"sort"
	"sync"
)

var errPartialIndex = errors.New("index file holds a partial entry")

// Sizes of one entry of Kafka's OffsetIndex, TimeIndex and TransactionIndex files.
const (
	indexEntrySize     = 8  // relative offset int32, position int32
	timeIndexEntrySize = 12 // timestamp int64, relative offset int32
	txnIndexEntrySize  = 34 // version int16, producerId int64, first, last, LSO int64
)

type offsetEntry struct {
	rel int32 // offset − segment base of the last offset of the indexed batch
	pos int32 // byte position of that batch in the .log file
}

type timeEntry struct {
	ts  int64
	rel int32
}

// indexes holds one segment's offset, time and transaction indexes in memory, mirrored
// to their files by appending (Kafka's OffsetIndex, TimeIndex and TransactionIndex
// layouts, never preallocated, so the files are always trimmed). mu guards the slices
// against concurrent readers; the files are written only by the appender.
type indexes struct {
	mu      sync.RWMutex
	offsets []offsetEntry
	times   []timeEntry
	aborted []AbortedTxn

	offFile, timeFile, txnFile *os.File
	buf                        [txnIndexEntrySize]byte
}

// appendOffset adds an offset index entry and writes it to the .index file.
func (x *indexes) appendOffset(rel, pos int32) error {
	b := x.buf[:indexEntrySize]
	binary.BigEndian.PutUint32(b, uint32(rel))
	binary.BigEndian.PutUint32(b[4:], uint32(pos))
	if _, err := x.offFile.Write(b); err != nil {
		return err
	}
	x.mu.Lock()
	x.offsets = append(x.offsets, offsetEntry{rel, pos})
	x.mu.Unlock()
	return nil
}

// maybeAppendTime adds a time index entry when ts is above the last entry's timestamp,
// as Kafka's TimeIndex.maybeAppend does.
func (x *indexes) maybeAppendTime(ts int64, rel int32) error {
	x.mu.RLock()
	n := len(x.times)
	skip := n > 0 && (ts <= x.times[n-1].ts || rel < x.times[n-1].rel)
	x.mu.RUnlock()
	if skip {
		return nil
	}
	b := x.buf[:timeIndexEntrySize]
	binary.BigEndian.PutUint64(b, uint64(ts))
	binary.BigEndian.PutUint32(b[8:], uint32(rel))
	if _, err := x.timeFile.Write(b); err != nil {
		return err
	}
	x.mu.Lock()
	x.times = append(x.times, timeEntry{ts, rel})
	x.mu.Unlock()
	return nil
}

// appendAborted adds an aborted transaction to the .txnindex file.
func (x *indexes) appendAborted(t AbortedTxn) error {
	b := x.buf[:txnIndexEntrySize]
	binary.BigEndian.PutUint16(b, 0)
	binary.BigEndian.PutUint64(b[2:], uint64(t.ProducerID))
	binary.BigEndian.PutUint64(b[10:], uint64(t.FirstOffset))
	binary.BigEndian.PutUint64(b[18:], uint64(t.LastOffset))
	binary.BigEndian.PutUint64(b[26:], uint64(t.LastStableOffset))
	if _, err := x.txnFile.Write(b); err != nil {
		return err
	}
	x.mu.Lock()
	x.aborted = append(x.aborted, t)
	x.mu.Unlock()
	return nil
}

// lookup returns the byte position from which to scan for offset rel: the position of
// the last indexed batch whose last offset is below rel (Kafka's OffsetIndex.lookup,
// adjusted so the scan starts at a batch that may contain rel), or 0.
func (x *indexes) lookup(rel int32) int32 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	// first entry with entry.rel >= rel: that batch or an earlier one contains rel.
	i := sort.Search(len(x.offsets), func(i int) bool { return x.offsets[i].rel >= rel })
	if i == 0 {
		return 0
	}
	// entry i−1 is a batch ending before rel; the batch after it starts the scan. Its
	// position is not indexed, so scan from entry i−1's batch.
	return x.offsets[i-1].pos
}

// lookupTime returns the relative offset from which to scan for the first record with
// timestamp >= ts (Kafka's TimeIndex.lookup): the entry before the first entry >= ts.
func (x *indexes) lookupTime(ts int64) (int32, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := sort.Search(len(x.times), func(i int) bool { return x.times[i].ts >= ts })
	if i == 0 {
		return 0, false
	}
	return x.times[i-1].rel, true
}

// truncateAborted drops aborted transactions whose marker is at or after offset.
func (x *indexes) truncateAborted(offset int64) error {
	x.mu.Lock()
	k := sort.Search(len(x.aborted), func(k int) bool { return x.aborted[k].LastOffset >= offset })
	x.aborted = x.aborted[:k]
	x.mu.Unlock()
	if err := x.txnFile.Truncate(int64(k) * txnIndexEntrySize); err != nil {
		return err
	}
	_, err := x.txnFile.Seek(int64(k)*txnIndexEntrySize, 0)
	return err
}

// reset empties all three indexes and their files.
func (x *indexes) reset() error {
	x.mu.Lock()
	x.offsets, x.times, x.aborted = x.offsets[:0], x.times[:0], x.aborted[:0]
	x.mu.Unlock()
	for _, f := range []*os.File{x.offFile, x.timeFile, x.txnFile} {
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.Seek(0, 0); err != nil {
			return err
		}
	}
	return nil
}

// load reads the three index files and checks them against a .log of size logSize
// (Kafka's sanityCheck): whole entries, increasing offsets/timestamps, positions inside
// the log. It reports false when any index must be rebuilt.
func (x *indexes) load(logSize int64) bool {
	offs, err := readAll(x.offFile, indexEntrySize)
	if err != nil {
		return false
	}
	times, err := readAll(x.timeFile, timeIndexEntrySize)
	if err != nil {
		return false
	}
	txns, err := readAll(x.txnFile, txnIndexEntrySize)
	if err != nil {
		return false
	}
	x.offsets = x.offsets[:0]
	for i := 0; i < len(offs); i += indexEntrySize {
		e := offsetEntry{int32(binary.BigEndian.Uint32(offs[i:])), int32(binary.BigEndian.Uint32(offs[i+4:]))}
		if e.rel < 0 || e.pos < 0 || int64(e.pos) >= logSize {
			return false
		}
		if n := len(x.offsets); n > 0 && (e.rel <= x.offsets[n-1].rel || e.pos <= x.offsets[n-1].pos) {
			return false
		}
		x.offsets = append(x.offsets, e)
	}
	x.times = x.times[:0]
	for i := 0; i < len(times); i += timeIndexEntrySize {
		e := timeEntry{int64(binary.BigEndian.Uint64(times[i:])), int32(binary.BigEndian.Uint32(times[i+8:]))}
		if e.rel < 0 {
			return false
		}
		if n := len(x.times); n > 0 && (e.ts <= x.times[n-1].ts || e.rel < x.times[n-1].rel) {
			return false
		}
		x.times = append(x.times, e)
	}
	x.aborted = x.aborted[:0]
	for i := 0; i < len(txns); i += txnIndexEntrySize {
		if binary.BigEndian.Uint16(txns[i:]) != 0 {
			return false
		}
		x.aborted = append(x.aborted, AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(txns[i+2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(txns[i+10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(txns[i+18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(txns[i+26:])),
		})
	}
	for _, f := range []*os.File{x.offFile, x.timeFile, x.txnFile} {
		if _, err := f.Seek(0, 2); err != nil {
			return false
		}
	}
	return true
}

// readAll reads a whole index file, failing when its size is not a multiple of entry.
func readAll(f *os.File, entry int) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size()%int64(entry) != 0 {
		return nil, errPartialIndex
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

func (x *indexes) sync() error {
	for _, f := range []*os.File{x.offFile, x.timeFile, x.txnFile} {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return nil
}

func (x *indexes) close() error {
	var first error
	for _, f := range []*os.File{x.offFile, x.timeFile, x.txnFile} {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
