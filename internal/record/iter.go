package record

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Errors of RecordIter (besides those of Next, which BatchIter returns). Both mean the
// records section does not hold what the batch header declares; callers map them to
// CORRUPT_MESSAGE / INVALID_RECORD or to storage's corruption error.
var (
	// ErrRecord: a record does not decode (its length, attributes, timestamp delta,
	// offset delta, key or value runs past the record or the records section), the
	// section ends before recordCount records, or the section does not decompress.
	ErrRecord = errors.New("malformed record")
	// ErrRecordCount: recordCount is negative, or bytes are left after recordCount
	// records (Kafka's "Incorrect declared batch size, records still remaining").
	ErrRecordCount = errors.New("record count does not match the records section")
)

// BatchIter walks the record batches concatenated in a byte slice (a produce request's
// or fetch response's records, a log read) with the framing rules of Next. It never
// copies or allocates, and does not check CRCs (Batch.Check does). Use:
//
//	it := record.IterBatches(buf)
//	for it.Next() {
//		b := it.Batch()
//	}
//	if err := it.Err(); err != nil { … }
type BatchIter struct {
	buf  []byte
	pos  int // start of the current batch; after the end, where iteration stopped
	next int // start of the batch after the current one
	cur  Batch
	err  error
}

// IterBatches returns an iterator over the batches of buf.
func IterBatches(buf []byte) BatchIter { return BatchIter{buf: buf} }

// Next advances to the next whole batch and reports whether there is one. It returns
// false at the end of buf and at the first bytes that do not frame as a batch (Err
// says which), and keeps returning false afterwards.
func (it *BatchIter) Next() bool {
	if it.err != nil {
		return false
	}
	it.pos, it.cur = it.next, nil
	if it.pos >= len(it.buf) {
		return false
	}
	b, _, err := Next(it.buf[it.pos:])
	if err != nil {
		it.err = err
		return false
	}
	it.cur, it.next = b, it.pos+len(b)
	return true
}

// Batch is the current batch (nil once Next returned false). It aliases buf.
func (it *BatchIter) Batch() Batch { return it.cur }

// Pos is the byte position in buf of the current batch; once Next returned false, the
// position where iteration stopped (len(buf) at a clean end, else the first unframed byte).
func (it *BatchIter) Pos() int { return it.pos }

// Err is nil when buf ended on a batch boundary, ErrTruncate when it ends with part of
// a batch (normal for a fetch response), or the framing error (ErrLength, ErrMagic) of
// the bytes at Pos.
func (it *BatchIter) Err() error { return it.err }

// Record is one record of a batch (Kafka's DefaultRecord), decoded in place: Key, Value
// and Body alias the batch (or its decompressed records section) and are nil/empty as
// encoded: nil for a null key or value, non-nil for an empty one. Headers are not decoded.
type Record struct {
	Attributes     int8
	TimestampDelta int64 // relative to the batch's base timestamp, as encoded
	OffsetDelta    int64 // relative to the batch's base offset, as encoded
	// Timestamp is the record's timestamp as Kafka reports it: the batch's max
	// timestamp under LogAppendTime, else base timestamp + TimestampDelta.
	Timestamp int64
	Offset    int64 // base offset + OffsetDelta
	Key       []byte
	Value     []byte
	// Body is the record as encoded from its key length on (key, value, headers), for
	// re-encoding it with new deltas (the log cleaner).
	Body []byte
}

// RecordIter walks the records of one batch. A compressed batch is decompressed once,
// at the first Next, by the package's one decompressor (franz-go's, which pools its
// decoders); an uncompressed batch is walked in place without allocating. The mirror
// path never uses it. Use:
//
//	it := record.IterRecords(b)
//	for it.Next() {
//		r := it.Record()
//	}
//	if err := it.Err(); err != nil { … }
type RecordIter struct {
	b       Batch
	data    []byte // the undecoded rest of the records section
	i       int32  // records decoded so far
	started bool
	done    bool
	rec     Record
	err     error
}

// IterRecords returns an iterator over the records of b, a whole batch (as BatchIter
// or Next return it; anything shorter is ErrRecord); it decodes nothing until Next.
func IterRecords(b Batch) RecordIter { return RecordIter{b: b} }

// Next decodes the next record and reports whether there is one. It returns false
// after recordCount records and at the first record that does not decode (Err says
// which), and keeps returning false afterwards.
func (it *RecordIter) Next() bool {
	if it.done {
		return false
	}
	if !it.started {
		it.started = true
		if len(it.b) < HeaderSize || it.b.Size() < HeaderSize || it.b.Size() > len(it.b) {
			return it.fail(fmt.Errorf("%w: not a whole batch (%d bytes)", ErrRecord, len(it.b)))
		}
		if it.b.RecordCount() < 0 {
			return it.fail(fmt.Errorf("%w: %d records in batch at offset %d", ErrRecordCount, it.b.RecordCount(), it.b.BaseOffset()))
		}
		data, err := decompress(it.b)
		if err != nil {
			return it.fail(err)
		}
		it.data = data
	}
	if it.i == it.b.RecordCount() {
		it.done = true
		if len(it.data) != 0 {
			it.err = fmt.Errorf("%w: %d bytes after the %d records of batch at offset %d", ErrRecordCount, len(it.data), it.i, it.b.BaseOffset())
		}
		return false
	}
	data := it.data
	length, n := binary.Varint(data)
	if n <= 0 || length < 1 || int64(len(data)-n) < length {
		if len(data) == 0 {
			return it.fail(fmt.Errorf("%w: batch at offset %d ends after %d of its %d records", ErrRecord, it.b.BaseOffset(), it.i, it.b.RecordCount()))
		}
		return it.bad("length")
	}
	rec := data[n : n+int(length)]
	it.data = data[n+int(length):]
	r := Record{Attributes: int8(rec[0])}
	rec = rec[1:]
	if r.TimestampDelta, n = binary.Varint(rec); n <= 0 {
		return it.bad("timestamp delta")
	}
	rec = rec[n:]
	if r.OffsetDelta, n = binary.Varint(rec); n <= 0 {
		return it.bad("offset delta")
	}
	rec = rec[n:]
	r.Body = rec
	var ok bool
	if r.Key, rec, ok = varBytes(rec); !ok {
		return it.bad("key")
	}
	if r.Value, _, ok = varBytes(rec); !ok {
		return it.bad("value")
	}
	r.Offset = it.b.BaseOffset() + r.OffsetDelta
	if it.b.LogAppendTime() {
		r.Timestamp = it.b.MaxTimestamp()
	} else {
		r.Timestamp = it.b.BaseTimestamp() + r.TimestampDelta
	}
	it.rec = r
	it.i++
	return true
}

// Record is the current record (valid after Next returned true).
func (it *RecordIter) Record() Record { return it.rec }

// Err is nil after the declared records decoded and filled the records section
// exactly, else an error wrapping ErrRecord or ErrRecordCount.
func (it *RecordIter) Err() error { return it.err }

func (it *RecordIter) fail(err error) bool {
	it.done, it.err, it.rec = true, err, Record{}
	return false
}

func (it *RecordIter) bad(field string) bool {
	return it.fail(fmt.Errorf("%w: record %d of batch at offset %d: bad %s", ErrRecord, it.i, it.b.BaseOffset(), field))
}

// varBytes splits a varint-length-prefixed byte string (negative length: null) off b.
func varBytes(b []byte) (v, rest []byte, ok bool) {
	l, n := binary.Varint(b)
	if n <= 0 {
		return nil, nil, false
	}
	b = b[n:]
	if l < 0 {
		return nil, b, true
	}
	if int64(len(b)) < l {
		return nil, nil, false
	}
	return b[:l:l], b[l:], true
}

// decompressor is kmirror's one decompressor of records sections.
var decompressor = kgo.DefaultDecompressor()

// decompress returns b's records section, decompressed when b is compressed (a new
// buffer; franz-go pools the decoders).
func decompress(b Batch) ([]byte, error) {
	c := b.Compression()
	if c == 0 {
		return b.Records(), nil
	}
	data, err := decompressor.Decompress(b.Records(), kgo.CompressionCodecType(c))
	if err != nil {
		return nil, fmt.Errorf("%w: decompressing batch at offset %d (codec %d): %v", ErrRecord, b.BaseOffset(), c, err)
	}
	return data, nil
}
