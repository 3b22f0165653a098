package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

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
	it := record.IterBatches(records)
	if !it.Next() {
		return nil, invalid(kerr.CorruptMessage, "malformed record batch: %v", it.Err())
	}
	b := it.Batch()
	if len(b) != len(records) {
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
	checkTS := !r.logAppendTime && !b.LogAppendTime()
	it := record.IterRecords(b)
	for i := int64(0); it.Next(); i++ {
		rec := it.Record()
		if rec.OffsetDelta != i {
			return invalid(kerr.InvalidRecord, "record %d has offset delta %d; inner offsets must be consecutive from 0", i, rec.OffsetDelta)
		}
		if r.compacted && rec.Key == nil {
			return invalid(kerr.InvalidRecord, "compacted topic cannot accept a record without a key")
		}
		if checkTS {
			ts := rec.Timestamp
			if r.nowMs-ts > r.beforeMaxMs {
				return invalid(kerr.InvalidTimestamp, "timestamp %d of record %d is older than message.timestamp.before.max.ms %d", ts, i, r.beforeMaxMs)
			}
			if ts-r.nowMs > r.afterMaxMs {
				return invalid(kerr.InvalidTimestamp, "timestamp %d of record %d is ahead of the broker by more than message.timestamp.after.max.ms %d", ts, i, r.afterMaxMs)
			}
		}
	}
	switch err := it.Err(); {
	case err == nil:
		return nil
	case errors.Is(err, record.ErrRecordCount):
		return invalid(kerr.InvalidRecord, "record batch holds more bytes than its %d records", b.RecordCount())
	default:
		return invalid(kerr.CorruptMessage, "malformed record batch: %v", err)
	}
}
