package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/internal/record"
)

// File name suffixes of a segment, as in Apache Kafka's LogFileUtils.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	txnIndexSuffix  = ".txnindex"
)

// segmentName is the 20-digit, zero-padded base offset Kafka names segment files by.
func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

// segment is one LogSegment: a .log file of whole v2 batches with its indexes. size is
// the committed byte length readers may see; every other mutable field is owned by the
// appender (Log.mu), except the max-timestamp fields, which are guarded by idx.mu.
type segment struct {
	base int64
	path string   // path without suffix
	log  *os.File // file.f: replaced only with Log.mu and Log.rw held (copy-on-truncate)
	file *segFile // reference-counted owner of log
	size atomic.Int64
	idx  indexes

	released atomic.Bool // the segment's own reference to file was dropped (close)

	nextOffset      int64 // offset after the last batch (base when empty)
	bytesSinceIndex int64
	created         time.Time
	firstBatchTs    int64 // maxTimestamp of the first batch, −1 when none (Kafka's rollingBasedTimestamp)

	maxTs         int64 // largest batch maxTimestamp, −1 when none (guarded by idx.mu)
	maxTsPos      int64 // position of the first batch carrying maxTs
	maxTsBatchEnd int64 // last offset of that batch
}

// openSegment opens (creating when missing) the files of the segment based at base.
func openSegment(dir string, base int64) (*segment, error) {
	s := &segment{base: base, path: filepath.Join(dir, segmentName(base)), nextOffset: base,
		created: time.Now(), firstBatchTs: -1, maxTs: -1, maxTsBatchEnd: -1}
	var err error
	open := func(suffix string) *os.File {
		if err != nil {
			return nil
		}
		var f *os.File
		f, err = os.OpenFile(s.path+suffix, os.O_RDWR|os.O_CREATE, 0o644)
		return f
	}
	s.log = open(logSuffix)
	if s.log != nil {
		s.file = newSegFile(s.log)
	}
	s.idx.offFile = open(indexSuffix)
	s.idx.timeFile = open(timeIndexSuffix)
	s.idx.txnFile = open(txnIndexSuffix)
	if err != nil {
		s.closeFiles()
		return nil, err
	}
	st, err := s.log.Stat()
	if err != nil {
		s.closeFiles()
		return nil, err
	}
	s.size.Store(st.Size())
	if _, err := s.log.Seek(0, io.SeekEnd); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

func (s *segment) closeFiles() {
	for _, f := range []*os.File{s.log, s.idx.offFile, s.idx.timeFile, s.idx.txnFile} {
		if f != nil {
			f.Close()
		}
	}
}

// close closes the index files and drops the segment's reference to its .log file,
// which is closed once no FileRange holds it either. Closing twice is a no-op.
func (s *segment) close() error {
	if s.released.Swap(true) {
		return nil
	}
	err := s.idx.close()
	if err2 := s.file.release(); err == nil {
		err = err2
	}
	return err
}

// segFile is a segment's .log file with a reference count: one reference held by the
// segment until it is closed (deleted by retention, replaced by the cleaner, truncated
// away, its log closed or deleted) plus one per outstanding FileRange, so that a range
// handed to a Fetch response stays readable until it is written (Kafka keeps a
// deleted segment's FileChannel open the same way until the send completes).
//
// Bytes handed to sendfile(2) are not copied: the socket keeps references to the page
// cache pages until the data is sent (on loopback, until the peer reads it), so those
// bytes must never be rewritten in place. Appends only add bytes and deletions unlink,
// which leaves the pages alone; a truncation inside a file that was ever ranged writes
// a new file instead of cutting this one (Log.TruncateTo).
type segFile struct {
	f      *os.File
	refs   atomic.Int64
	ranged atomic.Bool // a FileRange of the file was handed out
}

func newSegFile(f *os.File) *segFile {
	sf := &segFile{f: f}
	sf.refs.Store(1)
	return sf
}

// release drops a reference and closes the file when it was the last one.
func (sf *segFile) release() error {
	switch n := sf.refs.Add(-1); {
	case n == 0:
		return sf.f.Close()
	case n < 0:
		panic("storage: segment file released too often")
	}
	return nil
}

// acquireRange adds the reference of a FileRange handed out to be sent; the caller
// holds a reference already (the segment's, under Log.rw).
func (sf *segFile) acquireRange() {
	sf.ranged.Store(true)
	sf.refs.Add(1)
}

// remove closes and deletes the segment's files.
func (s *segment) remove() error {
	s.close()
	var first error
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if err := os.Remove(s.path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
			first = err
		}
	}
	return first
}

func (s *segment) sync() error {
	if err := s.log.Sync(); err != nil {
		return err
	}
	return s.idx.sync()
}

// indexFull reports Kafka's OffsetIndex/TimeIndex isFull for maxIndexBytes.
func (s *segment) indexFull(maxIndexBytes int32) bool {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	return len(s.idx.offsets) >= int(maxIndexBytes)/indexEntrySize ||
		len(s.idx.times) >= int(maxIndexBytes)/timeIndexEntrySize
}

// canHold reports whether lastOffset can be indexed relative to the segment base
// (Kafka's canConvertToRelativeOffset; spec section 16).
func (s *segment) canHold(baseOffset, lastOffset int64) bool {
	return baseOffset >= s.base && lastOffset-s.base <= math.MaxInt32
}

// track records one batch written at pos in the segment's in-memory state and indexes
// (Kafka's LogSegment.append): an offset index entry every index.interval.bytes, a time
// index entry when the max timestamp grows. writeIndex=false only updates memory.
func (s *segment) track(b record.Batch, pos int64, interval int32, writeIndex bool) error {
	size := int64(b.Size())
	last := b.LastOffset()
	ts := b.MaxTimestamp()
	if s.firstBatchTs < 0 && s.nextOffset == s.base && pos == 0 {
		s.firstBatchTs = ts
	}
	s.idx.mu.Lock()
	if ts > s.maxTs {
		s.maxTs, s.maxTsPos, s.maxTsBatchEnd = ts, pos, last
	}
	maxTs, maxEnd := s.maxTs, s.maxTsBatchEnd
	s.idx.mu.Unlock()
	s.nextOffset = last + 1
	if s.bytesSinceIndex > int64(interval) {
		if writeIndex {
			if err := s.idx.appendOffset(int32(last-s.base), int32(pos)); err != nil {
				return err
			}
			if err := s.idx.maybeAppendTime(maxTs, int32(maxEnd-s.base)); err != nil {
				return err
			}
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += size
	return nil
}

// finishTimeIndex appends the segment's final time index entry when it stops being the
// active segment (Kafka's onBecomeInactiveSegment).
func (s *segment) finishTimeIndex() error {
	s.idx.mu.RLock()
	maxTs, maxEnd := s.maxTs, s.maxTsBatchEnd
	s.idx.mu.RUnlock()
	if maxTs < 0 {
		return nil
	}
	return s.idx.maybeAppendTime(maxTs, int32(maxEnd-s.base))
}

// resetState forgets everything track learned, before a rescan.
func (s *segment) resetState() {
	s.nextOffset = s.base
	s.bytesSinceIndex = 0
	s.firstBatchTs = -1
	s.idx.mu.Lock()
	s.maxTs, s.maxTsPos, s.maxTsBatchEnd = -1, 0, -1
	s.idx.mu.Unlock()
}

// scanError describes why a segment scan stopped early: the position of the first bad
// byte and the reason.
type scanError struct {
	pos    int64
	reason string
}

func (e *scanError) Error() string { return fmt.Sprintf("position %d: %s", e.pos, e.reason) }

// scanner walks the batches of a segment file. With full=false it reads only headers
// (and whole control batches); with full=true it reads whole batches and checks their
// CRC.
type scanner struct {
	f    *os.File
	pos  int64
	end  int64
	full bool
	buf  []byte
	// shared, when set, is a buffer kept across scans (Log.scanBuf): buf starts as it
	// and it keeps buf when buf grows, so that a load of many segments allocates once.
	shared *[]byte
}

// grow makes buf hold at least n bytes.
func (sc *scanner) grow(n int64) {
	if sc.buf == nil && sc.shared != nil {
		sc.buf = *sc.shared
	}
	if int64(cap(sc.buf)) >= n {
		return
	}
	sc.buf = make([]byte, 0, max(n, 64<<10))
	if sc.shared != nil {
		*sc.shared = sc.buf
	}
}

// next returns the batch at the scanner's position and advances. It returns io.EOF at
// the end and a *scanError for a torn or corrupt batch.
func (sc *scanner) next() (record.Batch, int64, error) {
	pos := sc.pos
	if pos >= sc.end {
		return nil, pos, io.EOF
	}
	if sc.end-pos < record.HeaderSize {
		return nil, pos, &scanError{pos, fmt.Sprintf("torn batch header (%d bytes left)", sc.end-pos)}
	}
	sc.grow(record.HeaderSize)
	hdr := sc.buf[:record.HeaderSize]
	if _, err := sc.f.ReadAt(hdr, pos); err != nil {
		return nil, pos, &scanError{pos, "read: " + err.Error()}
	}
	b := record.Batch(hdr)
	if b.Magic() != 2 {
		return nil, pos, &scanError{pos, fmt.Sprintf("magic %d, want 2", b.Magic())}
	}
	if int(b.Length()) < record.HeaderSize-record.LogOverhead {
		return nil, pos, &scanError{pos, fmt.Sprintf("batch length %d too small", b.Length())}
	}
	size := int64(b.Size())
	if pos+size > sc.end {
		return nil, pos, &scanError{pos, fmt.Sprintf("torn batch: length %d, %d bytes left", size, sc.end-pos)}
	}
	if b.LastOffsetDelta() < 0 {
		return nil, pos, &scanError{pos, "negative lastOffsetDelta"}
	}
	if sc.full || b.IsControl() {
		sc.grow(size)
		whole := sc.buf[:size]
		if _, err := sc.f.ReadAt(whole, pos); err != nil {
			return nil, pos, &scanError{pos, "read: " + err.Error()}
		}
		b = record.Batch(whole)
		if sc.full {
			if err := b.Check(); err != nil {
				return nil, pos, &scanError{pos, err.Error()}
			}
		}
	}
	sc.pos = pos + size
	return b, pos, nil
}
