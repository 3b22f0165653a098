package storage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kmirror/kmirror/internal/record"
)

// FuzzRecover appends arbitrary bytes to a valid segment and opens the log: Open must
// not panic, and the recovered log must hold only valid batches.
func FuzzRecover(f *testing.F) {
	valid := mkBatch(f, batchOpts{base: 3, n: 2, ts: 5})
	f.Add([]byte{})
	f.Add([]byte(valid))
	f.Add([]byte(valid[:30]))
	f.Add(append(append([]byte(nil), valid...), 0xff, 0xff))
	f.Fuzz(func(t *testing.T, tail []byte) {
		dir := t.TempDir()
		l := openT(t, dir, DefaultConfig())
		mustAppend(t, l, mkBatch(t, batchOpts{n: 3, ts: 1}), 0)
		l.Close()
		path := filepath.Join(dir, segmentName(0)+".log")
		fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.Write(tail)
		fh.Close()
		l, err = Open(dir, [16]byte{1}, DefaultConfig(), quietLogger())
		if err != nil {
			return
		}
		defer l.Close()
		for _, b := range readAllBatches(t, l) {
			if b.Check() != nil {
				t.Fatal("invalid batch served")
			}
		}
		if l.LogEndOffset() < 3 {
			t.Fatalf("lost valid data: LEO %d", l.LogEndOffset())
		}
		l.OffsetForTimestamp(0)
		l.MaxTimestamp()
		mustAppend(t, l, record.Build(record.BatchHeader{ProducerID: -1, BaseSequence: -1}, []record.KV{{Value: []byte("x")}}), 0)
	})
}
