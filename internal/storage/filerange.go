package storage

import (
	"fmt"
	"io"
	"os"
)

// FileRange is a byte range of a segment's .log file holding whole record batches, as
// returned by Log.ReadRange: Len bytes of File from byte position Pos (Apache Kafka's
// FileRecords slice, written to the socket with sendfile). The range holds a
// reference to the file: call Release exactly once when done with it; File must not
// be used afterwards, and must not be read through its shared offset (Read, Seek), only
// with ReadAt or with an explicit offset (pread, sendfile).
type FileRange struct {
	File       *os.File
	Pos        int64 // byte position of the first batch in File
	Len        int64 // length in bytes, 0 for no records
	LastOffset int64 // last offset of the last batch in the range, −1 when empty

	ref *segFile
}

// Release drops the range's reference to the segment file; the file is closed if its
// segment is gone and this was the last reference.
func (r FileRange) Release() {
	if r.ref != nil {
		r.ref.release()
	}
}

// ReadInto reads the range into buf, which must be at least Len bytes long, and
// returns buf[:Len].
func (r FileRange) ReadInto(buf []byte) ([]byte, error) {
	buf = buf[:r.Len]
	if r.Len == 0 {
		return buf, nil
	}
	n, err := r.File.ReadAt(buf, r.Pos)
	if n == len(buf) {
		return buf, nil
	}
	if err == nil || err == io.EOF {
		err = fmt.Errorf("%w: segment file shorter than the range read", io.ErrUnexpectedEOF)
	}
	return nil, err
}
