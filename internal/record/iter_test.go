package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testKVs are records with a key, an empty key, a null key, a null value and headers.
var testKVs = []KV{
	{Key: []byte("k0"), Value: []byte("v0")},
	{Key: []byte{}, Value: bytes.Repeat([]byte("x"), 300)},
	{Key: nil, Value: []byte("v2")},
	{Key: []byte("k3"), Value: nil, Headers: []kmsg.Header{{Key: "h", Value: []byte("hv")}}},
}

func testBatch(base int64) Batch {
	return Build(BatchHeader{BaseOffset: base, LeaderEpoch: 2, Timestamp: 1000, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 3}, testKVs)
}

// compressBatch returns b with its records section compressed by codec (1 gzip,
// 2 snappy, 3 lz4, 4 zstd), as a producer writes it.
func compressBatch(t testing.TB, b Batch, codec int8) Batch {
	t.Helper()
	cc := map[int8]kgo.CompressionCodec{1: kgo.GzipCompression(), 2: kgo.SnappyCompression(), 3: kgo.Lz4Compression(), 4: kgo.ZstdCompression()}[codec]
	comp, err := kgo.DefaultCompressor(cc)
	if err != nil {
		t.Fatal(err)
	}
	packed, typ := comp.Compress(new(bytes.Buffer), b.Records())
	if int8(typ) != codec {
		t.Fatalf("compressor used codec %d, want %d", typ, codec)
	}
	return withSection(b, packed, codec)
}

// withSection returns a copy of b's header with records section sec, codec set, length
// and CRC updated.
func withSection(b Batch, sec []byte, codec int8) Batch {
	out := Batch(append(append([]byte{}, b[:HeaderSize]...), sec...))
	binary.BigEndian.PutUint16(out[offAttributes:], uint16(b.Attributes()&^CompressionMask|int16(codec)))
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-LogOverhead))
	out.UpdateCRC()
	return out
}

func collect(b Batch) ([]Record, error) {
	var out []Record
	it := IterRecords(b)
	for it.Next() {
		out = append(out, it.Record())
	}
	return out, it.Err()
}

func TestIterBatchesSplitsABuffer(t *testing.T) {
	var buf []byte
	var starts []int
	for i := range 3 {
		starts = append(starts, len(buf))
		buf = append(buf, testBatch(int64(10*i))...)
	}
	it := IterBatches(buf)
	n := 0
	for it.Next() {
		if it.Pos() != starts[n] || it.Batch().BaseOffset() != int64(10*n) || it.Batch().Check() != nil {
			t.Fatalf("batch %d at %d: base %d, check %v", n, it.Pos(), it.Batch().BaseOffset(), it.Batch().Check())
		}
		n++
	}
	if n != 3 || it.Err() != nil || it.Pos() != len(buf) || it.Batch() != nil {
		t.Fatalf("%d batches, err %v, stopped at %d of %d", n, it.Err(), it.Pos(), len(buf))
	}
	if it.Next() {
		t.Fatal("Next after the end")
	}
	empty := IterBatches(nil)
	if empty.Next() || empty.Err() != nil || empty.Pos() != 0 {
		t.Fatal("empty buffer")
	}
}

func TestIterBatchesMalformed(t *testing.T) {
	good := testBatch(0)
	badLength := append(Batch{}, good...)
	binary.BigEndian.PutUint32(badLength[offLength:], HeaderSize-LogOverhead-1)
	badMagic := append(Batch{}, good...)
	badMagic[offMagic] = 1
	for _, tc := range []struct {
		name string
		tail []byte
		want error
	}{
		{"truncated batch", good[:len(good)-1], ErrTruncate},
		{"truncated length field", good[:LogOverhead-1], ErrTruncate},
		{"truncated header", good[:HeaderSize-1], ErrTruncate},
		{"length below the header", badLength, ErrLength},
		{"negative length", func() []byte {
			b := append([]byte{}, good...)
			binary.BigEndian.PutUint32(b[offLength:], 0xffffffff)
			return b
		}(), ErrLength},
		{"magic 1", badMagic, ErrMagic},
	} {
		buf := append(append([]byte{}, good...), tc.tail...)
		it := IterBatches(buf)
		if !it.Next() || it.Pos() != 0 {
			t.Fatalf("%s: first batch not returned", tc.name)
		}
		if it.Next() || !errors.Is(it.Err(), tc.want) || it.Pos() != len(good) || it.Batch() != nil {
			t.Fatalf("%s: err %v at %d, want %v at %d", tc.name, it.Err(), it.Pos(), tc.want, len(good))
		}
		if it.Next() || !errors.Is(it.Err(), tc.want) {
			t.Fatalf("%s: Next after an error", tc.name)
		}
	}
	// A CRC mismatch frames: BatchIter leaves the CRC to Batch.Check.
	flipped := append(Batch{}, good...)
	flipped[len(flipped)-1] ^= 1
	it := IterBatches(flipped)
	if !it.Next() || it.Batch().Check() != ErrCRC || it.Next() || it.Err() != nil {
		t.Fatalf("CRC mismatch: check %v, err %v", it.Batch().Check(), it.Err())
	}
}

func TestIterRecordsEveryCodec(t *testing.T) {
	plain := testBatch(100)
	want, err := collect(plain)
	if err != nil || len(want) != len(testKVs) {
		t.Fatalf("uncompressed: %d records, %v", len(want), err)
	}
	for i, r := range want {
		kv := testKVs[i]
		if r.Offset != 100+int64(i) || r.OffsetDelta != int64(i) || r.Timestamp != 1000 || r.TimestampDelta != 0 ||
			!bytes.Equal(r.Key, kv.Key) || (r.Key == nil) != (kv.Key == nil) ||
			!bytes.Equal(r.Value, kv.Value) || (r.Value == nil) != (kv.Value == nil) {
			t.Fatalf("record %d: %+v, want %+v", i, r, kv)
		}
	}
	// Body is the record from its key length on: decoding it back gives the headers.
	var k kmsg.Record
	body := want[3].Body
	enc := append(binary.AppendVarint(nil, int64(3+len(body))), 0, 0, 6) // attributes, deltas 0 and 3
	enc = append(enc, body...)
	if err := k.ReadFrom(enc); err != nil || len(k.Headers) != 1 || k.Headers[0].Key != "h" || string(k.Headers[0].Value) != "hv" {
		t.Fatalf("body %x: %v %+v", body, err, k)
	}
	for codec := int8(1); codec <= 4; codec++ {
		got, err := collect(compressBatch(t, plain, codec))
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Fatalf("codec %d:\n got %+v\nwant %+v", codec, got, want)
		}
	}
}

func TestIterRecordsLogAppendTime(t *testing.T) {
	b := Build(BatchHeader{Timestamp: 1000, ProducerID: -1, BaseSequence: -1}, testKVs[:2])
	b.SetLogAppendTime(5000)
	recs, err := collect(b)
	if err != nil || len(recs) != 2 || recs[0].Timestamp != 5000 || recs[1].Timestamp != 5000 || recs[1].TimestampDelta != 0 {
		t.Fatalf("%+v %v", recs, err)
	}
}

func TestIterRecordsControlBatches(t *testing.T) {
	m := BuildEndTxnMarker(ControlCommit, 9, 2, 5, 77, 1)
	recs, err := collect(m)
	if err != nil || len(recs) != 1 || !bytes.Equal(recs[0].Key, ControlKey(ControlCommit)) ||
		len(recs[0].Value) != 6 || binary.BigEndian.Uint32(recs[0].Value[2:]) != 77 {
		t.Fatalf("commit marker: %+v %v", recs, err)
	}
	if typ, err := m.ControlType(); err != nil || typ != ControlCommit {
		t.Fatalf("ControlType %d %v", typ, err)
	}
	r := BuildMirrorPIDReset("src", 1, 1)
	if recs, err := collect(r); err != nil || len(recs) != 1 || string(recs[0].Value[4:]) != "src" {
		t.Fatalf("pid reset: %+v %v", recs, err)
	}
	// An emptied marker (a cleaned source) has no record to read the type from.
	empty := withSection(m, nil, 0)
	binary.BigEndian.PutUint32(empty[offRecordCount:], 0)
	empty.UpdateCRC()
	if recs, err := collect(empty); err != nil || len(recs) != 0 {
		t.Fatalf("empty marker: %+v %v", recs, err)
	}
	if _, err := empty.ControlType(); err != ErrTruncate {
		t.Fatalf("empty marker ControlType: %v", err)
	}
	if _, err := testBatch(0).ControlType(); err == nil {
		t.Fatal("ControlType of a data batch")
	}
}

func TestIterRecordsCountMismatch(t *testing.T) {
	withCount := func(n int32) Batch {
		b := append(Batch{}, testBatch(0)...)
		binary.BigEndian.PutUint32(b[offRecordCount:], uint32(n))
		b.UpdateCRC()
		return b
	}
	for _, tc := range []struct {
		name  string
		b     Batch
		nrecs int
		want  error
	}{
		{"more records declared", withCount(int32(len(testKVs) + 1)), len(testKVs), ErrRecord},
		{"fewer records declared", withCount(int32(len(testKVs) - 1)), len(testKVs) - 1, ErrRecordCount},
		{"no records declared", withCount(0), 0, ErrRecordCount},
		{"negative count", withCount(-1), 0, ErrRecordCount},
	} {
		recs, err := collect(tc.b)
		if len(recs) != tc.nrecs || !errors.Is(err, tc.want) {
			t.Fatalf("%s: %d records, %v; want %d, %v", tc.name, len(recs), err, tc.nrecs, tc.want)
		}
	}
	// The same through a compressed section.
	b := compressBatch(t, withCount(int32(len(testKVs)-1)), 4)
	if recs, err := collect(b); len(recs) != len(testKVs)-1 || !errors.Is(err, ErrRecordCount) {
		t.Fatalf("zstd: %d records, %v", len(recs), err)
	}
}

func TestIterRecordsMalformed(t *testing.T) {
	one := Build(BatchHeader{Timestamp: 1, ProducerID: -1, BaseSequence: -1}, []KV{{Key: []byte("key"), Value: []byte("value")}})
	sec := one.Records() // len, attrs, tsDelta, offDelta, keyLen, "key", valueLen, "value", headers
	mutate := func(f func(s []byte) []byte) Batch {
		return withSection(one, f(append([]byte{}, sec...)), 0)
	}
	for _, tc := range []struct {
		name string
		b    Batch
	}{
		{"record cut short", mutate(func(s []byte) []byte { return s[:len(s)-1] })},
		{"zero length", mutate(func(s []byte) []byte { s[0] = 0; return s })},
		{"negative length", mutate(func(s []byte) []byte { s[0] = 1; return s })},
		{"length past the section", mutate(func(s []byte) []byte { s[0] += 2; return s })},
		{"timestamp delta varint too long", mutate(func([]byte) []byte {
			return append([]byte{2 * 12, 0}, bytes.Repeat([]byte{0xff}, 11)...)
		})},
		{"key past the record", mutate(func(s []byte) []byte { s[4] = 2 * 20; return s })},
		{"value past the record", mutate(func(s []byte) []byte { s[8] = 2 * 20; return s })},
		{"gzip garbage", withSection(one, []byte("not gzip at all"), 1)},
		{"zstd garbage", withSection(one, []byte("not zstd at all"), 4)},
		{"unknown codec 5", withSection(one, sec, 5)},
		{"header only", one[:HeaderSize]},
		{"shorter than a header", one[:20]},
	} {
		recs, err := collect(tc.b)
		if !errors.Is(err, ErrRecord) || len(recs) != 0 {
			t.Fatalf("%s: %d records, err %v; want ErrRecord", tc.name, len(recs), err)
		}
	}
	if _, err := collect(one); err != nil {
		t.Fatalf("unmutated: %v", err)
	}
}

// TestIteratorsDoNotAllocate: walking batch headers (the log's and the mirror's path)
// and the records of an uncompressed batch (Produce validation) allocate nothing.
func TestIteratorsDoNotAllocate(t *testing.T) {
	var buf []byte
	for i := range 100 {
		buf = append(buf, testBatch(int64(4*i))...)
	}
	var sink int64
	if n := testing.AllocsPerRun(100, func() {
		it := IterBatches(buf)
		for it.Next() {
			sink += it.Batch().LastOffset()
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}); n != 0 {
		t.Fatalf("BatchIter: %v allocations per walk of 100 batches", n)
	}
	b := testBatch(0)
	if n := testing.AllocsPerRun(100, func() {
		it := IterRecords(b)
		for it.Next() {
			sink += it.Record().Offset + int64(len(it.Record().Key))
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}); n != 0 {
		t.Fatalf("RecordIter: %v allocations per uncompressed batch", n)
	}
	_ = sink
}

func BenchmarkIterBatches(b *testing.B) {
	var buf []byte
	for i := range 100 {
		buf = append(buf, testBatch(int64(4*i))...)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var sink int64
	for b.Loop() {
		it := IterBatches(buf)
		for it.Next() {
			sink += it.Batch().LastOffset()
		}
	}
	_ = sink
}

func BenchmarkIterRecords(b *testing.B) {
	kvs := make([]KV, 100)
	for i := range kvs {
		kvs[i] = KV{Key: fmt.Appendf(nil, "key-%d", i), Value: bytes.Repeat([]byte{byte(i)}, 100)}
	}
	plain := Build(BatchHeader{Timestamp: 1, ProducerID: -1, BaseSequence: -1}, kvs)
	for _, codec := range []int8{0, 1, 2, 3, 4} {
		bt := plain
		if codec != 0 {
			bt = compressBatch(b, plain, codec)
		}
		b.Run(fmt.Sprintf("codec=%d", codec), func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			var sink int
			for b.Loop() {
				it := IterRecords(bt)
				for it.Next() {
					sink += len(it.Record().Value)
				}
				if it.Err() != nil {
					b.Fatal(it.Err())
				}
			}
			_ = sink
		})
	}
}

// FuzzIterators: on any bytes the iterators never panic, batches tile the buffer up to
// where iteration stopped, and records stay inside their batch's declared count.
func FuzzIterators(f *testing.F) {
	f.Add([]byte(testBatch(0)))
	f.Add(append(append([]byte{}, testBatch(0)...), testBatch(4)[:70]...))
	f.Add([]byte(BuildEndTxnMarker(ControlAbort, 1, 1, 1, 1, 1)))
	for codec := int8(1); codec <= 4; codec++ {
		f.Add([]byte(compressBatch(f, testBatch(0), codec)))
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		it := IterBatches(buf)
		end := 0
		for it.Next() {
			b := it.Batch()
			if it.Pos() != end || len(b) != b.Size() || len(b) < HeaderSize || b.Magic() != 2 {
				t.Fatalf("batch at %d (want %d): %d bytes, size %d, magic %d", it.Pos(), end, len(b), b.Size(), b.Magic())
			}
			end += len(b)
			ri := IterRecords(b)
			n := int32(0)
			for ri.Next() {
				if r := ri.Record(); r.Offset-b.BaseOffset() != r.OffsetDelta {
					t.Fatalf("record offset %d, delta %d, base %d", r.Offset, r.OffsetDelta, b.BaseOffset())
				}
				n++
			}
			if n > max(b.RecordCount(), 0) || (ri.Err() == nil && n != b.RecordCount()) {
				t.Fatalf("%d records of %d declared, err %v", n, b.RecordCount(), ri.Err())
			}
			if err := ri.Err(); err != nil && !errors.Is(err, ErrRecord) && !errors.Is(err, ErrRecordCount) {
				t.Fatalf("record error %v", err)
			}
		}
		if it.Pos() != end || (it.Err() == nil) != (end == len(buf)) {
			t.Fatalf("stopped at %d, batches end at %d of %d, err %v", it.Pos(), end, len(buf), it.Err())
		}
	})
}
