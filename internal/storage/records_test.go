package storage

import (
	"encoding/binary"
	"testing"

	"github.com/kmirror/kmirror/internal/record"
)

// TestRecordWalksReportCorruption: the storage code that decodes records (time
// lookups, the cleaner, markers in the producer state) reads a batch whose records
// section does not hold its records as ErrCorrupt, and decodes good batches of every
// codec the tests build.
func TestRecordWalksReportCorruption(t *testing.T) {
	for _, codec := range []int8{0, 1, 4} {
		b := mkBatch(t, batchOpts{base: 10, n: 3, ts: 100, tsStep: 10, codec: codec, valueSize: 8})
		if o, ts, ok, err := findRecord(b, 115, 0); err != nil || !ok || o != 12 || ts != 120 {
			t.Fatalf("codec %d: findRecord: %d %d %v %v", codec, o, ts, ok, err)
		}
		if recs, err := decodeRecords(b); err != nil || len(recs) != 3 || recs[2].offDelta != 2 || recs[2].ts != 120 {
			t.Fatalf("codec %d: decodeRecords: %+v %v", codec, recs, err)
		}
	}
	short := mkBatch(t, batchOpts{n: 3, ts: 100, valueSize: 8})
	short = append(record.Batch{}, short[:len(short)-1]...)
	binary.BigEndian.PutUint32(short[8:], uint32(len(short)-record.LogOverhead))
	short.UpdateCRC()
	if _, _, _, err := findRecord(short, 1000, 0); !isErr(err, ErrCorrupt) || !isErr(err, record.ErrRecord) {
		t.Fatalf("findRecord of a cut batch: %v", err)
	}
	if _, err := decodeRecords(short); !isErr(err, ErrCorrupt) || !isErr(err, record.ErrRecord) {
		t.Fatalf("decodeRecords of a cut batch: %v", err)
	}
	m := record.BuildEndTxnMarker(record.ControlCommit, 5, 1, 0, 42, 1)
	if v := controlValue(m); len(v) != 6 || binary.BigEndian.Uint32(v[2:]) != 42 {
		t.Fatalf("controlValue %x", v)
	}
	empty := append(record.Batch{}, m[:record.HeaderSize]...)
	binary.BigEndian.PutUint32(empty[8:], uint32(record.HeaderSize-record.LogOverhead))
	binary.BigEndian.PutUint32(empty[57:], 0)
	if v := controlValue(empty); v != nil {
		t.Fatalf("controlValue of a marker without records: %x", v)
	}
}
