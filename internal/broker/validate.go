package broker

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/record"
)

// produceRules are the topic settings Produce validation applies (Kafka's LogValidator).
type produceRules struct {
	maxMessageBytes int64
	compacted       bool
	logAppendTime   bool
	beforeMaxMs     int64
	afterMaxMs      int64
	nowMs           int64
}

// validationError carries the Kafka error and the message for a refused batch.
type validationError struct {
	code *kerr.Error
	msg  string
}

func (e *validationError) Error() string { return e.msg }

func invalid(code *kerr.Error, format string, args ...any) error {
	return &validationError{code: code, msg: fmt.Sprintf(format, args...)}
}

var decompressor = kgo.DefaultDecompressor()

// validateProduce checks the records of one partition in a Produce request as Kafka's
// LogValidator does and returns the single batch: exactly one v2 batch, CRC-32C,
// no control batch, size within max.message.bytes, record count matching the offset
// range, consecutive record offset deltas, timestamps within the before/after windows
// (CreateTime), and keys present on compacted topics. Errors: CORRUPT_MESSAGE,
// INVALID_RECORD, MESSAGE_TOO_LARGE, INVALID_TIMESTAMP, UNSUPPORTED_FOR_MESSAGE_FORMAT.
func validateProduce(records []byte, r produceRules) (record.Batch, error) {
	if len(records) == 0 {
		return nil, invalid(kerr.InvalidRecord, "produce request holds no record batch")
	}
	if len(records) > 16 && records[16] != 2 {
		return nil, invalid(kerr.UnsupportedForMessageFormat, "record batch magic %d: only magic 2 is accepted", records[16])
	}
	b, rest, err := record.Next(records)
	if err != nil {
		return nil, invalid(kerr.CorruptMessage, "malformed record batch: %v", err)
	}
	if len(rest) != 0 {
		return nil, invalid(kerr.InvalidRecord, "produce requests must contain exactly one record batch per partition")
	}
	if int64(b.Size()) > r.maxMessageBytes {
		return nil, invalid(kerr.MessageTooLarge, "record batch of %d bytes exceeds max.message.bytes %d", b.Size(), r.maxMessageBytes)
	}
	if err := b.Check(); err != nil {
		if errors.Is(err, record.ErrCRC) {
			return nil, invalid(kerr.CorruptMessage, "record batch failed its CRC-32C check")
		}
		return nil, invalid(kerr.CorruptMessage, "malformed record batch: %v", err)
	}
	if b.IsControl() {
		return nil, invalid(kerr.InvalidRecord, "clients may not produce control batches")
	}
	if b.RecordCount() != b.LastOffsetDelta()+1 || b.RecordCount() <= 0 {
		return nil, invalid(kerr.InvalidRecord, "record count %d does not match the batch offset range (lastOffsetDelta %d)", b.RecordCount(), b.LastOffsetDelta())
	}
	if err := validateRecords(b, r); err != nil {
		return nil, err
	}
	return b, nil
}

// validateRecords walks the records (decompressing once if needed) without allocating
// per record: offset deltas, per-record timestamps, and keys on compacted topics.
func validateRecords(b record.Batch, r produceRules) error {
	data := b.Records()
	if c := b.Compression(); c != 0 {
		var err error
		data, err = decompressor.Decompress(data, kgo.CompressionCodecType(c))
		if err != nil {
			return invalid(kerr.CorruptMessage, "record batch does not decompress: %v", err)
		}
	}
	checkTS := !r.logAppendTime && !b.LogAppendTime()
	base := b.BaseTimestamp()
	for i := int32(0); i < b.RecordCount(); i++ {
		length, n := binary.Varint(data)
		if n <= 0 || length < 0 || int64(len(data)-n) < length {
			return invalid(kerr.CorruptMessage, "record %d is truncated", i)
		}
		rec := data[n : n+int(length)]
		data = data[n+int(length):]
		if len(rec) < 1 {
			return invalid(kerr.CorruptMessage, "record %d is empty", i)
		}
		rec = rec[1:] // attributes
		tsDelta, n := binary.Varint(rec)
		if n <= 0 {
			return invalid(kerr.CorruptMessage, "record %d timestamp is malformed", i)
		}
		rec = rec[n:]
		offDelta, n := binary.Varint(rec)
		if n <= 0 || offDelta != int64(i) {
			return invalid(kerr.InvalidRecord, "record %d has offset delta %d; inner offsets must be consecutive from 0", i, offDelta)
		}
		rec = rec[n:]
		keyLen, n := binary.Varint(rec)
		if n <= 0 {
			return invalid(kerr.CorruptMessage, "record %d key is malformed", i)
		}
		if r.compacted && keyLen < 0 {
			return invalid(kerr.InvalidRecord, "compacted topic cannot accept a record without a key")
		}
		if checkTS {
			ts := base + tsDelta
			if r.nowMs-ts > r.beforeMaxMs {
				return invalid(kerr.InvalidTimestamp, "timestamp %d of record %d is older than message.timestamp.before.max.ms %d", ts, i, r.beforeMaxMs)
			}
			if ts-r.nowMs > r.afterMaxMs {
				return invalid(kerr.InvalidTimestamp, "timestamp %d of record %d is ahead of the broker by more than message.timestamp.after.max.ms %d", ts, i, r.afterMaxMs)
			}
		}
	}
	if len(data) != 0 {
		return invalid(kerr.InvalidRecord, "record batch holds more bytes than its %d records", b.RecordCount())
	}
	return nil
}
