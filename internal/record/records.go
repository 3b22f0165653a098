package record

import (
	"encoding/binary"
	"fmt"
)

// ForEach decodes the records of b (decompressing once if needed) and calls fn with
// each record's absolute offset, key and value (nil for null). Headers are skipped.
// It is for kmirror's own internal topics (__consumer_offsets, __mirror_state) and for
// time lookups; the mirror path never calls it.
func ForEach(b Batch, fn func(offset, timestamp int64, key, value []byte) error) error {
	data, err := decompress(b)
	if err != nil {
		return err
	}
	base, baseTS := b.BaseOffset(), b.BaseTimestamp()
	for i := int32(0); i < b.RecordCount(); i++ {
		length, n := binary.Varint(data)
		if n <= 0 || length < 0 || int64(len(data)-n) < length {
			return fmt.Errorf("record %d of batch at offset %d: %w", i, base, ErrTruncate)
		}
		rec := data[n : n+int(length)]
		data = data[n+int(length):]
		if len(rec) < 1 {
			return ErrTruncate
		}
		rec = rec[1:]
		tsDelta, n := binary.Varint(rec)
		if n <= 0 {
			return ErrTruncate
		}
		rec = rec[n:]
		offDelta, n := binary.Varint(rec)
		if n <= 0 {
			return ErrTruncate
		}
		rec = rec[n:]
		key, rec, err := varintBytes(rec)
		if err != nil {
			return err
		}
		value, _, err := varintBytes(rec)
		if err != nil {
			return err
		}
		ts := baseTS + tsDelta
		if b.LogAppendTime() {
			ts = b.MaxTimestamp()
		}
		if err := fn(base+offDelta, ts, key, value); err != nil {
			return err
		}
	}
	return nil
}

func varintBytes(b []byte) ([]byte, []byte, error) {
	l, n := binary.Varint(b)
	if n <= 0 {
		return nil, nil, ErrTruncate
	}
	b = b[n:]
	if l < 0 {
		return nil, b, nil
	}
	if int64(len(b)) < l {
		return nil, nil, ErrTruncate
	}
	return b[:l:l], b[l:], nil
}
