package record

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBuildDecodesWithKmsg(t *testing.T) {
	b := Build(BatchHeader{BaseOffset: 42, LeaderEpoch: 3, Timestamp: 1000, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 5},
		[]KV{{Key: []byte("k1"), Value: []byte("v1")}, {Key: nil, Value: []byte("v2"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}}})
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if rb.FirstOffset != 42 || rb.NumRecords != 2 || rb.LastOffsetDelta != 1 || rb.ProducerID != 7 || rb.FirstSequence != 5 {
		t.Fatalf("bad header %+v", rb)
	}
	if b.LastOffset() != 43 || b.LastSequence() != 6 {
		t.Fatalf("last offset %d seq %d", b.LastOffset(), b.LastSequence())
	}
	recs := rb.Records
	var r kmsg.Record
	if err := r.ReadFrom(recs); err != nil {
		t.Fatal(err)
	}
	if string(r.Key) != "k1" || string(r.Value) != "v1" {
		t.Fatalf("record %+v", r)
	}
	b.SetBaseOffset(100)
	if b.Check() != nil || b.BaseOffset() != 100 {
		t.Fatal("base offset patch broke the batch")
	}
	b[len(b)-1] ^= 1
	if b.Check() != ErrCRC {
		t.Fatal("flipped byte not detected")
	}
}

func TestControlType(t *testing.T) {
	m := BuildEndTxnMarker(ControlAbort, 9, 2, 5, 0, 1)
	if typ, err := m.ControlType(); err != nil || typ != ControlAbort || !m.IsControl() || !m.IsTransactional() {
		t.Fatalf("abort marker: %d %v", typ, err)
	}
	r := BuildMirrorPIDReset("src-cluster", 11, 1)
	if typ, err := r.ControlType(); err != nil || typ != ControlMirrorPIDReset {
		t.Fatalf("pid reset: %d %v", typ, err)
	}
}

func TestNextSplitsAndDetectsTruncation(t *testing.T) {
	a := Build(BatchHeader{Timestamp: 1, ProducerID: -1, BaseSequence: -1}, []KV{{Value: []byte("a")}})
	c := Build(BatchHeader{BaseOffset: 1, Timestamp: 1, ProducerID: -1, BaseSequence: -1}, []KV{{Value: []byte("b")}})
	buf := append(append([]byte{}, a...), c[:len(c)-3]...)
	first, rest, err := Next(buf)
	if err != nil || first.BaseOffset() != 0 {
		t.Fatal(err)
	}
	if _, _, err := Next(rest); err != ErrTruncate {
		t.Fatalf("want ErrTruncate, got %v", err)
	}
}

func TestIncrementSequenceWraps(t *testing.T) {
	if IncrementSequence(2147483647, 1) != 0 || IncrementSequence(5, 3) != 8 {
		t.Fatal("wrap")
	}
}

func TestIterRecordsDecodesKeysAndValues(t *testing.T) {
	b := Build(BatchHeader{BaseOffset: 10, Timestamp: 500, ProducerID: -1, BaseSequence: -1},
		[]KV{{Key: []byte("a"), Value: []byte("1")}, {Key: nil, Value: nil}})
	var got []string
	it := IterRecords(b)
	for it.Next() {
		r := it.Record()
		got = append(got, fmt.Sprintf("%d/%d/%v/%v", r.Offset, r.Timestamp, r.Key == nil, string(r.Value)))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "10/500/false/1" || got[1] != "11/500/true/" {
		t.Fatalf("got %v", got)
	}
}
