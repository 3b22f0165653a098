package broker

// The zero-copy Fetch response: record batches stay in the segment files and are
// written to the socket with sendfile(2) by internal/wire, as Apache Kafka does with
// FileRecords / TransferableRecords. Everything else of the FetchResponse is encoded
// here into byte parts, byte for byte what kmsg's AppendTo writes.

import (
	"encoding/binary"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/storage"
	"github.com/kmirror/kmirror/internal/wire"
)

// fetchData holds what one Fetch response borrows: file ranges of the record batches
// (one per partition with records) and pooled buffers of batches read into memory
// (a partition listed twice, or the kmsg fallback), plus the encoding buffer.
type fetchData struct {
	bufs   fetchBufs
	ranges map[kafka.TopicIDPartition]storage.FileRange
	enc    *[]byte
}

// addRange keeps r as the record batches of k; false (r not kept) when k has a range
// already.
func (d *fetchData) addRange(k kafka.TopicIDPartition, r storage.FileRange) bool {
	if _, dup := d.ranges[k]; dup {
		return false
	}
	if d.ranges == nil {
		d.ranges = map[kafka.TopicIDPartition]storage.FileRange{}
	}
	d.ranges[k] = r
	return true
}

// rangeOf returns the file range of partition sp of topic st, if it has one.
func (d *fetchData) rangeOf(st *kmsg.FetchResponseTopic, sp *kmsg.FetchResponseTopicPartition) (storage.FileRange, bool) {
	if len(d.ranges) == 0 {
		return storage.FileRange{}, false
	}
	r, ok := d.ranges[kafka.TopicIDPartition{Topic: st.Topic, TopicID: st.TopicID, Partition: sp.Partition}]
	return r, ok
}

// hasRecords reports whether sp carries record batches, in memory or as a range.
func (d *fetchData) hasRecords(st *kmsg.FetchResponseTopic, sp *kmsg.FetchResponseTopicPartition) bool {
	if len(sp.RecordBatches) > 0 {
		return true
	}
	_, ok := d.rangeOf(st, sp)
	return ok
}

// release releases the ranges and returns the buffers to their pools.
func (d *fetchData) release() {
	for _, r := range d.ranges {
		r.Release()
	}
	d.ranges = nil
	d.bufs.release()
	if d.enc != nil {
		encBufs.Put(d.enc)
		d.enc = nil
	}
}

// materialize reads every range of resp into pooled buffers (RecordBatches) and
// releases the ranges, for responses encoded by kmsg. A range that cannot be read
// leaves its partition with KAFKA_STORAGE_ERROR.
func (d *fetchData) materialize(resp *kmsg.FetchResponse) {
	for i := range resp.Topics {
		st := &resp.Topics[i]
		for j := range st.Partitions {
			sp := &st.Partitions[j]
			r, ok := d.rangeOf(st, sp)
			if !ok {
				continue
			}
			data, err := r.ReadInto(d.bufs.alloc(int(r.Len)))
			if err != nil {
				sp.ErrorCode = kerr.KafkaStorageError.Code
				data = []byte{}
			}
			sp.RecordBatches = data
		}
	}
	for _, r := range d.ranges {
		r.Release()
	}
	d.ranges = nil
}

// encBufs holds encoding buffers (*[]byte) of the byte parts of Fetch responses.
var encBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// streamedFetch is a Fetch response whose record batches are file ranges: the wire
// layer writes BodyParts (sendfile for the ranges), then calls Release.
type streamedFetch struct {
	*kmsg.FetchResponse
	d *fetchData
}

// Unwrap returns the FetchResponse.
func (s streamedFetch) Unwrap() kmsg.Response { return s.FetchResponse }

// BodyParts encodes the response body as parts (wire.PartsResponse).
func (s streamedFetch) BodyParts() []wire.Part {
	if s.d.enc == nil {
		s.d.enc = encBufs.Get().(*[]byte)
	}
	buf, parts := encodeFetchParts((*s.d.enc)[:0], s.FetchResponse, s.d.rangeOf)
	*s.d.enc = buf
	return parts
}

// Release releases the file ranges and buffers (wire.Releaser).
func (s streamedFetch) Release() { s.d.release() }

// fetchPartsOK reports whether encodeFetchParts encodes resp exactly as kmsg would:
// versions 4–16 without the tagged fields kmirror does not set (CurrentLeader,
// SnapshotID, NodeEndpoints, unknown tags other than a partition's: MirrorLeaderEpoch
// is one). Others take the kmsg path.
func fetchPartsOK(resp *kmsg.FetchResponse) bool {
	if resp.Version < 4 || resp.Version > 16 || resp.UnknownTags.Len() > 0 || len(resp.Brokers) > 0 {
		return false
	}
	for i := range resp.Topics {
		st := &resp.Topics[i]
		if st.UnknownTags.Len() > 0 {
			return false
		}
		for j := range st.Partitions {
			sp := &st.Partitions[j]
			if sp.DivergingEpoch.UnknownTags.Len() > 0 ||
				sp.CurrentLeader.LeaderID != -1 || sp.CurrentLeader.LeaderEpoch != -1 || sp.CurrentLeader.UnknownTags.Len() > 0 ||
				sp.SnapshotID.EndOffset != -1 || sp.SnapshotID.Epoch != -1 || sp.SnapshotID.UnknownTags.Len() > 0 {
				return false
			}
			for k := range sp.AbortedTransactions {
				if sp.AbortedTransactions[k].UnknownTags.Len() > 0 {
					return false
				}
			}
		}
	}
	return true
}

// encodeFetchParts encodes the body of resp (FetchResponse v4–16 accepted by
// fetchPartsOK) into buf and returns buf and the body as parts: byte parts slicing buf,
// and for each partition that rangeOf gives a range, the length prefix of
// RecordBatches from the range length (int32 before v12, uvarint length+1 from v12)
// followed by a file part. Partitions without a range encode their RecordBatches
// bytes. The bytes, with file parts read in, are those of kmsg's AppendTo.
func encodeFetchParts(buf []byte, resp *kmsg.FetchResponse, rangeOf func(*kmsg.FetchResponseTopic, *kmsg.FetchResponseTopicPartition) (storage.FileRange, bool)) ([]byte, []wire.Part) {
	version := resp.Version
	flex := version >= 12
	// Byte parts are recorded as offsets into buf (which grows) and sliced at the end.
	type mark struct {
		from, to int
		r        storage.FileRange
	}
	var marks []mark
	from := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, uint32(resp.ThrottleMillis))
	if version >= 7 {
		buf = binary.BigEndian.AppendUint16(buf, uint16(resp.ErrorCode))
		buf = binary.BigEndian.AppendUint32(buf, uint32(resp.SessionID))
	}
	buf = appendArrayLen(buf, len(resp.Topics), flex)
	for i := range resp.Topics {
		st := &resp.Topics[i]
		if version <= 12 {
			buf = appendString(buf, st.Topic, flex)
		} else {
			buf = append(buf, st.TopicID[:]...)
		}
		buf = appendArrayLen(buf, len(st.Partitions), flex)
		for j := range st.Partitions {
			sp := &st.Partitions[j]
			buf = binary.BigEndian.AppendUint32(buf, uint32(sp.Partition))
			buf = binary.BigEndian.AppendUint16(buf, uint16(sp.ErrorCode))
			buf = binary.BigEndian.AppendUint64(buf, uint64(sp.HighWatermark))
			buf = binary.BigEndian.AppendUint64(buf, uint64(sp.LastStableOffset))
			if version >= 5 {
				buf = binary.BigEndian.AppendUint64(buf, uint64(sp.LogStartOffset))
			}
			if sp.AbortedTransactions == nil {
				buf = appendNullLen(buf, flex)
			} else {
				buf = appendArrayLen(buf, len(sp.AbortedTransactions), flex)
				for _, a := range sp.AbortedTransactions {
					buf = binary.BigEndian.AppendUint64(buf, uint64(a.ProducerID))
					buf = binary.BigEndian.AppendUint64(buf, uint64(a.FirstOffset))
					if flex {
						buf = append(buf, 0) // no tagged fields
					}
				}
			}
			if version >= 11 {
				buf = binary.BigEndian.AppendUint32(buf, uint32(sp.PreferredReadReplica))
			}
			if r, ok := rangeOf(st, sp); ok {
				buf = appendBytesLen(buf, int(r.Len), flex)
				marks = append(marks, mark{from, len(buf), r})
				from = len(buf)
			} else if sp.RecordBatches == nil {
				buf = appendNullLen(buf, flex)
			} else {
				buf = appendBytesLen(buf, len(sp.RecordBatches), flex)
				buf = append(buf, sp.RecordBatches...)
			}
			if flex {
				// Tagged fields as kmsg writes them: DivergingEpoch (tag 0) when set, then
				// the unknown tags (MirrorLeaderEpoch) in ascending order.
				de := sp.DivergingEpoch
				hasDE := de.Epoch != -1 || de.EndOffset != -1
				n := sp.UnknownTags.Len()
				if hasDE {
					n++
				}
				buf = kbin.AppendUvarint(buf, uint32(n))
				if hasDE {
					// tag 0, size 13: epoch, end offset, no tags
					buf = append(buf, 0, 13)
					buf = binary.BigEndian.AppendUint32(buf, uint32(de.Epoch))
					buf = binary.BigEndian.AppendUint64(buf, uint64(de.EndOffset))
					buf = append(buf, 0)
				}
				buf = sp.UnknownTags.AppendEach(buf)
			}
		}
		if flex {
			buf = append(buf, 0) // topic: no tagged fields
		}
	}
	if flex {
		buf = append(buf, 0) // response: no tagged fields
	}
	parts := make([]wire.Part, 0, 2*len(marks)+1)
	for _, m := range marks {
		parts = append(parts, wire.Part{Bytes: buf[m.from:m.to:m.to]}, wire.Part{File: m.r.File, Pos: m.r.Pos, Len: m.r.Len})
	}
	if from < len(buf) {
		parts = append(parts, wire.Part{Bytes: buf[from:len(buf):len(buf)]})
	}
	return buf, parts
}

// appendArrayLen appends an array length: int32, or uvarint length+1 when flexible.
func appendArrayLen(buf []byte, n int, flex bool) []byte {
	if flex {
		return binary.AppendUvarint(buf, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(buf, uint32(n))
}

// appendBytesLen appends the length of a non-null bytes field (as appendArrayLen).
func appendBytesLen(buf []byte, n int, flex bool) []byte { return appendArrayLen(buf, n, flex) }

// appendNullLen appends the length of a null array or bytes field: −1, or 0 when
// flexible.
func appendNullLen(buf []byte, flex bool) []byte {
	if flex {
		return append(buf, 0)
	}
	return binary.BigEndian.AppendUint32(buf, 0xffffffff)
}

// appendString appends a non-null string: int16 length, or uvarint length+1 when
// flexible, then the bytes.
func appendString(buf []byte, s string, flex bool) []byte {
	if flex {
		buf = binary.AppendUvarint(buf, uint64(len(s))+1)
	} else {
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(s)))
	}
	return append(buf, s...)
}
