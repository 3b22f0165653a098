package broker

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/record"
)

// TestValidateProduceErrors: the Kafka error of each kind of bad batch (LogValidator's
// rules), uncompressed and compressed.
func TestValidateProduceErrors(t *testing.T) {
	now := time.Now().UnixMilli()
	rules := produceRules{maxMessageBytes: 1 << 20, beforeMaxMs: 1 << 62, afterMaxMs: 1 << 62, nowMs: now}
	// section rewrites the records section of a 2-record seed batch (records of 27
	// bytes after a 1-byte length: attributes, tsDelta, offDelta, key, value, headers).
	section := func(f func(sec []byte) []byte) []byte {
		b := record.Batch(seedBatch(t, kgo.CompressionCodec{}, 2))
		sec := f(append([]byte{}, b.Records()...))
		out := record.Batch(append(append([]byte{}, b[:record.HeaderSize]...), sec...))
		binary.BigEndian.PutUint32(out[8:], uint32(len(out)-record.LogOverhead))
		out.UpdateCRC()
		return out
	}
	header := func(f func(b record.Batch)) []byte {
		b := record.Batch(seedBatch(t, kgo.CompressionCodec{}, 2))
		f(b)
		b.UpdateCRC()
		return b
	}
	compressed := func(codec kgo.CompressionCodec, sec []byte) []byte {
		b := record.Batch(seedBatch(t, codec, 2))
		out := record.Batch(append(append([]byte{}, b[:record.HeaderSize]...), sec...))
		binary.BigEndian.PutUint32(out[8:], uint32(len(out)-record.LogOverhead))
		out.UpdateCRC()
		return out
	}
	nullKey := record.Build(record.BatchHeader{Timestamp: now, ProducerID: -1, BaseSequence: -1}, []record.KV{{Value: []byte("v")}})
	old := record.Build(record.BatchHeader{Timestamp: now - 10_000, ProducerID: -1, BaseSequence: -1}, []record.KV{{Key: []byte("k")}})
	for _, tc := range []struct {
		name      string
		records   []byte
		compacted bool
		before    int64
		want      *kerr.Error
	}{
		{"valid", seedBatch(t, kgo.CompressionCodec{}, 2), false, 0, nil},
		{"valid gzip", seedBatch(t, kgo.GzipCompression(), 2), false, 0, nil},
		{"valid snappy", seedBatch(t, kgo.SnappyCompression(), 2), false, 0, nil},
		{"valid lz4", seedBatch(t, kgo.Lz4Compression(), 2), false, 0, nil},
		{"valid zstd", seedBatch(t, kgo.ZstdCompression(), 2), true, 0, nil},
		{"two batches", append(seedBatch(t, kgo.CompressionCodec{}, 1), seedBatch(t, kgo.CompressionCodec{}, 1)...), false, 0, kerr.InvalidRecord},
		{"trailing bytes", append(seedBatch(t, kgo.CompressionCodec{}, 1), 1, 2, 3), false, 0, kerr.InvalidRecord},
		{"truncated batch", seedBatch(t, kgo.CompressionCodec{}, 2)[:80], false, 0, kerr.CorruptMessage},
		{"magic 1", header(func(b record.Batch) { b[16] = 1 }), false, 0, kerr.UnsupportedForMessageFormat},
		{"CRC mismatch", func() []byte { b := seedBatch(t, kgo.CompressionCodec{}, 2); b[len(b)-1] ^= 1; return b }(), false, 0, kerr.CorruptMessage},
		{"control batch", header(func(b record.Batch) { b[22] |= record.ControlBit }), false, 0, kerr.InvalidRecord},
		{"count off the offset range", header(func(b record.Batch) { binary.BigEndian.PutUint32(b[57:], 3) }), false, 0, kerr.InvalidRecord},
		{"offset delta gap", section(func(s []byte) []byte { s[28+3] = 2 * 2; return s }), false, 0, kerr.InvalidRecord},
		{"bytes after the records", section(func(s []byte) []byte { return append(s, 0) }), false, 0, kerr.InvalidRecord},
		{"records section cut short", section(func(s []byte) []byte { return s[:len(s)-1] }), false, 0, kerr.CorruptMessage},
		{"record length past the section", section(func(s []byte) []byte { s[28] = 2 * 100; return s }), false, 0, kerr.CorruptMessage},
		// Accepted before the records were walked by record.RecordIter, which decodes
		// keys and values: Kafka refuses such records too.
		{"key past the record", section(func(s []byte) []byte { s[28+4] = 2 * 50; return s }), false, 0, kerr.CorruptMessage},
		{"value past the record", section(func(s []byte) []byte { s[28+6] = 2 * 50; return s }), false, 0, kerr.CorruptMessage},
		{"zero-length record", section(func(s []byte) []byte { return append([]byte{0}, s[28:]...) }), false, 0, kerr.CorruptMessage},
		{"gzip section that does not decompress", compressed(kgo.GzipCompression(), []byte("garbage")), false, 0, kerr.CorruptMessage},
		{"zstd section that does not decompress", compressed(kgo.ZstdCompression(), []byte("garbage")), false, 0, kerr.CorruptMessage},
		{"null key on a compacted topic", nullKey, true, 0, kerr.InvalidRecord},
		{"null key on a deleting topic", nullKey, false, 0, nil},
		{"timestamp too old", old, false, 1000, kerr.InvalidTimestamp},
	} {
		r := rules
		r.compacted = tc.compacted
		if tc.before != 0 {
			r.beforeMaxMs = tc.before
		}
		_, err := validateProduce(tc.records, r)
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != nil && err == nil:
			t.Errorf("%s: accepted, want %v", tc.name, tc.want)
		case tc.want != nil && err.(*validationError).code != tc.want:
			t.Errorf("%s: %v (%v), want %v", tc.name, err.(*validationError).code, err, tc.want)
		}
	}
}
