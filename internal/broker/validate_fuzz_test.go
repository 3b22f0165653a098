package broker

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/record"
)

// seedBatch builds a valid uncompressed batch, or with codec a compressed one.
func seedBatch(t testing.TB, codec kgo.CompressionCodec, n int) []byte {
	kvs := make([]record.KV, n)
	for i := range kvs {
		kvs[i] = record.KV{Key: []byte{byte('a' + i)}, Value: bytes.Repeat([]byte{byte(i)}, 20)}
	}
	bt := record.Build(record.BatchHeader{Timestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, kvs)
	if codec == (kgo.CompressionCodec{}) {
		return bt
	}
	comp, err := kgo.DefaultCompressor(codec)
	if err != nil {
		t.Fatal(err)
	}
	packed, typ := comp.Compress(new(bytes.Buffer), bt.Records())
	out := append(append([]byte{}, bt[:record.HeaderSize]...), packed...)
	cb := record.Batch(out)
	out[22] = byte(typ) // attributes low byte: compression
	// Length covers everything after the length field.
	l := len(out) - record.LogOverhead
	out[8], out[9], out[10], out[11] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
	cb.UpdateCRC()
	return out
}

// FuzzValidateProduce: validateProduce (Kafka's LogValidator for one partition) never
// panics, and whatever it accepts is one batch with a valid CRC whose record count
// matches its offset range.
func FuzzValidateProduce(f *testing.F) {
	f.Add(seedBatch(f, kgo.CompressionCodec{}, 1), false)
	f.Add(seedBatch(f, kgo.CompressionCodec{}, 5), true)
	f.Add(seedBatch(f, kgo.GzipCompression(), 3), false)
	f.Add(seedBatch(f, kgo.ZstdCompression(), 3), true)
	f.Add(seedBatch(f, kgo.SnappyCompression(), 2), false)
	f.Add(seedBatch(f, kgo.Lz4Compression(), 2), false)
	f.Fuzz(func(t *testing.T, records []byte, compacted bool) {
		now := time.Now().UnixMilli()
		rules := produceRules{maxMessageBytes: 1 << 20, compacted: compacted, beforeMaxMs: 1 << 62, afterMaxMs: 1 << 62, nowMs: now}
		b, err := validateProduce(records, rules)
		if err != nil {
			if _, ok := err.(*validationError); !ok {
				t.Fatalf("error %v is not a validationError", err)
			}
			return
		}
		if b.Check() != nil || b.RecordCount() != b.LastOffsetDelta()+1 || b.Size() != len(records) || b.IsControl() {
			t.Fatalf("accepted a batch that breaks the rules: count %d lastOffsetDelta %d size %d/%d", b.RecordCount(), b.LastOffsetDelta(), b.Size(), len(records))
		}
	})
}

// TestSeedBatchesValid: the fuzz seeds are valid batches, so fuzzing starts from
// inputs that reach the record walk.
func TestSeedBatchesValid(t *testing.T) {
	for _, c := range []kgo.CompressionCodec{{}, kgo.GzipCompression(), kgo.ZstdCompression(), kgo.SnappyCompression(), kgo.Lz4Compression()} {
		rules := produceRules{maxMessageBytes: 1 << 20, beforeMaxMs: 1 << 62, afterMaxMs: 1 << 62, nowMs: time.Now().UnixMilli()}
		if _, err := validateProduce(seedBatch(t, c, 3), rules); err != nil {
			t.Fatalf("seed batch: %v", err)
		}
	}
}
