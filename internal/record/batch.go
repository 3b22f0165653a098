// Package record reads and patches the header of Kafka's v2 record batch (magic 2) in
// place, without decoding records. It follows Apache Kafka's DefaultRecordBatch layout;
// every offset below is a byte position in the batch.
//
// BatchIter walks concatenated batches (header framing only, allocation-free);
// RecordIter decodes the records of one batch, decompressing it once with the
// package's one decompressor. The mirror path and the log's append and read paths use
// only the header accessors, Next and BatchIter, so mirrored batches are never
// decompressed; RecordIter serves Produce validation, the internal topics, the log
// cleaner and time lookups.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Byte positions of the v2 batch header fields (DefaultRecordBatch).
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// HeaderSize is the size in bytes of a v2 batch header (61).
	HeaderSize = 61
	// LogOverhead is the size of baseOffset + batchLength (12), the part not counted
	// by batchLength.
	LogOverhead = 12
	// crcStart is the first byte covered by the CRC-32C (attributes).
	crcStart = offAttributes
)

// Attribute bits of a v2 batch.
const (
	CompressionMask   = 0x07
	TimestampTypeBit  = 0x08 // 1 = LogAppendTime
	TransactionalBit  = 0x10
	ControlBit        = 0x20
	DeleteHorizonBit  = 0x40
	NoProducerID      = -1
	NoSequence        = -1
	NoPartitionLeader = -1
)

// Control record types (ControlRecordType). MirrorPIDReset is kmirror's type 7 from the
// cluster mirroring spec, section 5.
const (
	ControlAbort          int16 = 0
	ControlCommit         int16 = 1
	ControlMirrorPIDReset int16 = 7
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors returned by Check, Next and BatchIter; callers map them to CORRUPT_MESSAGE or
// INVALID_RECORD.
var (
	ErrShort    = errors.New("record batch shorter than its header")
	ErrMagic    = errors.New("record batch magic is not 2")
	ErrCRC      = errors.New("record batch CRC-32C mismatch")
	ErrLength   = errors.New("record batch length field is invalid")
	ErrTruncate = errors.New("record batch is truncated")
)

// Batch is a view over one whole v2 record batch (HeaderSize ≤ len). It aliases the
// caller's bytes; setters patch them in place.
type Batch []byte

// BaseOffset is the offset of the first record.
func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }

// Length is the batchLength field: bytes after the length field.
func (b Batch) Length() int32 { return int32(binary.BigEndian.Uint32(b[offLength:])) }

// Size is the whole batch size in bytes (LogOverhead + Length).
func (b Batch) Size() int { return LogOverhead + int(b.Length()) }

// LeaderEpoch is the partitionLeaderEpoch field.
func (b Batch) LeaderEpoch() int32 { return int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])) }

// Magic is the magic byte (2 for every batch kmirror accepts).
func (b Batch) Magic() int8 { return int8(b[offMagic]) }

// CRC is the stored CRC-32C.
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b[offCRC:]) }

// Attributes is the attributes field.
func (b Batch) Attributes() int16 { return int16(binary.BigEndian.Uint16(b[offAttributes:])) }

// Compression is the codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (b Batch) Compression() int8 { return int8(b.Attributes() & CompressionMask) }

// IsTransactional reports the transactional attribute.
func (b Batch) IsTransactional() bool { return b.Attributes()&TransactionalBit != 0 }

// IsControl reports the control attribute.
func (b Batch) IsControl() bool { return b.Attributes()&ControlBit != 0 }

// LogAppendTime reports whether the timestamp type is LogAppendTime.
func (b Batch) LogAppendTime() bool { return b.Attributes()&TimestampTypeBit != 0 }

// LastOffsetDelta is lastOffset − baseOffset.
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
}

// LastOffset is the offset of the last record (base + lastOffsetDelta).
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset is LastOffset + 1.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// BaseTimestamp is the first timestamp, ms.
func (b Batch) BaseTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])) }

// MaxTimestamp is the largest timestamp in the batch, ms.
func (b Batch) MaxTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])) }

// ProducerID is the producer ID (−1 when none).
func (b Batch) ProducerID() int64 { return int64(binary.BigEndian.Uint64(b[offProducerID:])) }

// ProducerEpoch is the producer epoch.
func (b Batch) ProducerEpoch() int16 { return int16(binary.BigEndian.Uint16(b[offProducerEpoch:])) }

// BaseSequence is the first sequence number (−1 when none).
func (b Batch) BaseSequence() int32 { return int32(binary.BigEndian.Uint32(b[offBaseSequence:])) }

// LastSequence is the sequence of the last record, wrapping at MaxInt32 like Kafka.
func (b Batch) LastSequence() int32 {
	if b.BaseSequence() == NoSequence {
		return NoSequence
	}
	return IncrementSequence(b.BaseSequence(), b.LastOffsetDelta())
}

// RecordCount is the recordCount field.
func (b Batch) RecordCount() int32 { return int32(binary.BigEndian.Uint32(b[offRecordCount:])) }

// Records is the (possibly compressed) records section.
func (b Batch) Records() []byte { return b[HeaderSize:b.Size()] }

// ComputeCRC computes CRC-32C over attributes..end.
func (b Batch) ComputeCRC() uint32 { return crc32.Checksum(b[crcStart:b.Size()], castagnoli) }

// SetBaseOffset patches the base offset; the CRC does not cover it.
func (b Batch) SetBaseOffset(o int64) { binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(o)) }

// SetLeaderEpoch patches partitionLeaderEpoch; the CRC does not cover it.
func (b Batch) SetLeaderEpoch(e int32) { binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(e)) }

// SetLogAppendTime sets the timestamp type to LogAppendTime with maxTimestamp ts (ms)
// and recomputes the CRC, as Kafka's LogValidator does.
func (b Batch) SetLogAppendTime(ts int64) {
	attrs := uint16(b.Attributes()) | TimestampTypeBit
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	b.UpdateCRC()
}

// UpdateCRC recomputes and stores the CRC-32C.
func (b Batch) UpdateCRC() { binary.BigEndian.PutUint32(b[offCRC:], b.ComputeCRC()) }

// Check validates the framing of one whole batch: size, magic 2, length and CRC-32C.
// It returns ErrShort, ErrMagic, ErrLength or ErrCRC.
func (b Batch) Check() error {
	if len(b) < HeaderSize {
		return ErrShort
	}
	if b.Magic() != 2 {
		return ErrMagic
	}
	if int(b.Length()) < HeaderSize-LogOverhead || b.Size() != len(b) {
		return ErrLength
	}
	if b.LastOffsetDelta() < 0 {
		return ErrLength
	}
	if b.CRC() != b.ComputeCRC() {
		return ErrCRC
	}
	return nil
}

// Next splits the first whole batch off buf. It returns (nil, rest, nil) with
// ErrTruncate when buf holds only part of a batch (a partial trailing batch in a fetch
// response is normal; callers stop there), and a framing error for a bad header.
// It does not check the CRC; call Check for that. BatchIter is the loop over a buffer.
func Next(buf []byte) (Batch, []byte, error) {
	if len(buf) < LogOverhead {
		return nil, buf, ErrTruncate
	}
	length := int32(binary.BigEndian.Uint32(buf[offLength:]))
	if length < HeaderSize-LogOverhead {
		if len(buf) < offMagic+1 {
			return nil, buf, ErrTruncate
		}
		return nil, buf, ErrLength
	}
	if len(buf) > offMagic && buf[offMagic] != 2 {
		return nil, buf, ErrMagic
	}
	size := LogOverhead + int(length)
	if len(buf) < size {
		return nil, buf, ErrTruncate
	}
	return Batch(buf[:size:size]), buf[size:], nil
}

// IncrementSequence adds n to seq, wrapping past MaxInt32 to 0 as Kafka's
// DefaultRecordBatch.incrementSequence does.
func IncrementSequence(seq, n int32) int32 {
	if seq > int32(^uint32(0)>>1)-n {
		return n - (int32(^uint32(0)>>1) - seq) - 1
	}
	return seq + n
}

// ControlType returns the control record type of a control batch, read from the key of
// its first record (version int16, type int16). It returns an error for a batch that is
// not a control batch or whose first record does not decode (ErrTruncate when there is
// none or its key is shorter than 4 bytes).
func (b Batch) ControlType() (int16, error) {
	if !b.IsControl() {
		return 0, fmt.Errorf("not a control batch")
	}
	it := IterRecords(b)
	if !it.Next() {
		if err := it.Err(); err != nil {
			return 0, err
		}
		return 0, ErrTruncate
	}
	key := it.Record().Key
	if len(key) < 4 {
		return 0, ErrTruncate
	}
	return int16(binary.BigEndian.Uint16(key[2:4])), nil
}
