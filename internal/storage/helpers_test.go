package storage

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/record"
)

// batchOpts describes a test batch.
type batchOpts struct {
	base      int64
	n         int   // records (default 1)
	ts        int64 // first record timestamp
	tsStep    int64 // timestamp increment per record
	pid       int64 // producer ID; 0 means none (−1)
	pepoch    int16
	seq       int32
	txn       bool
	codec     int8 // 0 none, 1 gzip, 4 zstd
	epoch     int32
	valueSize int
}

// mkBatch encodes a v2 batch with real records (optionally compressed) and a valid CRC.
func mkBatch(t testing.TB, o batchOpts) record.Batch {
	t.Helper()
	if o.n == 0 {
		o.n = 1
	}
	pid, seq := o.pid, o.seq
	if pid == 0 {
		pid, seq = -1, -1
	}
	var body []byte
	maxTs := o.ts
	for i := 0; i < o.n; i++ {
		r := kmsg.Record{TimestampDelta64: int64(i) * o.tsStep, OffsetDelta: int32(i),
			Value: bytes.Repeat([]byte{byte('a' + i%26)}, o.valueSize)}
		enc := r.AppendTo(nil)
		r.Length = int32(len(enc) - 1)
		body = r.AppendTo(body)
		if ts := o.ts + int64(i)*o.tsStep; ts > maxTs {
			maxTs = ts
		}
	}
	switch o.codec {
	case 1:
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(body)
		w.Close()
		body = b.Bytes()
	case 4:
		enc, _ := zstd.NewWriter(nil)
		body = enc.EncodeAll(body, nil)
		enc.Close()
	}
	attrs := int16(o.codec)
	if o.txn {
		attrs |= record.TransactionalBit
	}
	b := make([]byte, record.HeaderSize+len(body))
	binary.BigEndian.PutUint64(b[0:], uint64(o.base))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-record.LogOverhead))
	binary.BigEndian.PutUint32(b[12:], uint32(o.epoch))
	b[16] = 2
	binary.BigEndian.PutUint16(b[21:], uint16(attrs))
	binary.BigEndian.PutUint32(b[23:], uint32(o.n-1))
	binary.BigEndian.PutUint64(b[27:], uint64(o.ts))
	binary.BigEndian.PutUint64(b[35:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(o.pepoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[57:], uint32(o.n))
	copy(b[record.HeaderSize:], body)
	rb := record.Batch(b)
	rb.UpdateCRC()
	return rb
}

// logBuffer captures slog output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newLogger() (*slog.Logger, *logBuffer) {
	lb := &logBuffer{}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openT(t testing.TB, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, [16]byte{1}, cfg, quietLogger())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func smallConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 2048
	c.IndexIntervalBytes = 200
	return c
}

// readAllBatches reads the whole log from the log start through the LEO, checking every
// batch, and returns them.
func readAllBatches(t testing.TB, l *Log) []record.Batch {
	t.Helper()
	var out []record.Batch
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		data, err := l.Read(off, 1<<20, 1<<62, true)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(data) == 0 {
			break // the LEO lies past the data (a truncation into a gap)
		}
		it := record.IterBatches(data)
		for it.Next() {
			b := it.Batch()
			if err := b.Check(); err != nil {
				t.Fatalf("Read(%d): batch %d: %v", off, b.BaseOffset(), err)
			}
			if b.LastOffset() < off {
				t.Fatalf("Read(%d) returned batch ending at %d", off, b.LastOffset())
			}
			out = append(out, b)
			off = b.NextOffset()
		}
		if err := it.Err(); err != nil {
			t.Fatalf("Read(%d): bad framing: %v", off, err)
		}
	}
	return out
}

func mustAppend(t testing.TB, l *Log, b record.Batch, epoch int32) AppendInfo {
	t.Helper()
	info, err := l.AppendAsLeader(b, epoch, -1)
	if err != nil {
		t.Fatalf("AppendAsLeader: %v", err)
	}
	return info
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// openManaged opens partition t-0 of a Manager over dataDir; the Manager is closed at
// the test's end unless the test closes it.
func openManaged(t *testing.T, dataDir string, cfg Config) (*Manager, *Log) {
	t.Helper()
	return openManagedWith(t, dataDir, "t", cfg, quietLogger())
}

// openManagedWith is openManaged for partition topic-0, logging to logger.
func openManagedWith(t *testing.T, dataDir, topic string, cfg Config, logger *slog.Logger) (*Manager, *Log) {
	t.Helper()
	m, err := OpenManager(dataDir, logger)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Open(topic, 0, [16]byte{7}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, l
}

func segmentBases(l *Log) []int64 {
	var out []int64
	for _, s := range l.segs {
		out = append(out, s.base)
	}
	return out
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
