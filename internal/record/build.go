package record

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KV is one record to build: key and value (nil = null) and headers.
type KV struct {
	Key, Value []byte
	Headers    []kmsg.Header
}

// BatchHeader holds the header fields Build writes. BaseOffset is usually 0: the log
// assigns offsets when appending as leader.
type BatchHeader struct {
	BaseOffset    int64
	LeaderEpoch   int32
	Attributes    int16 // compression bits must be 0: Build writes uncompressed batches
	Timestamp     int64 // ms; every record gets this timestamp
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
}

// Build encodes an uncompressed v2 batch holding recs, with a valid CRC. Used for
// internal records (group offsets, mirror states) and control batches, never on the
// mirror path.
func Build(h BatchHeader, recs []KV) Batch {
	var body []byte
	for i, r := range recs {
		rec := kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value, Headers: r.Headers}
		enc := rec.AppendTo(nil)
		// AppendTo writes Length first; encode again with the real length.
		rec.Length = int32(len(enc) - varintLen(0))
		body = rec.AppendTo(body)
	}
	last := int32(len(recs) - 1)
	if last < 0 {
		last = 0
	}
	b := make([]byte, HeaderSize+len(body))
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(h.LeaderEpoch))
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(h.Attributes&^CompressionMask))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(last))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(h.Timestamp))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(h.Timestamp))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(recs)))
	copy(b[HeaderSize:], body)
	bb := Batch(b)
	bb.UpdateCRC()
	return bb
}

func varintLen(v int64) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutVarint(tmp[:], v)
}

// ControlKey encodes a control record key: version 0 and the control type.
func ControlKey(typ int16) []byte {
	k := make([]byte, 4)
	binary.BigEndian.PutUint16(k[2:], uint16(typ))
	return k
}

// BuildEndTxnMarker builds a transaction marker (ControlAbort or ControlCommit) control
// batch for producer pid/epoch, as Kafka's EndTransactionMarker (value: version 0,
// coordinatorEpoch int32).
func BuildEndTxnMarker(typ int16, pid int64, epoch int16, leaderEpoch int32, coordinatorEpoch int32, ts int64) Batch {
	v := make([]byte, 6)
	binary.BigEndian.PutUint32(v[2:], uint32(coordinatorEpoch))
	return Build(BatchHeader{
		LeaderEpoch: leaderEpoch, Attributes: ControlBit | TransactionalBit, Timestamp: ts,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: NoSequence,
	}, []KV{{Key: ControlKey(typ), Value: v}})
}

// BuildMirrorPIDReset builds the MIRROR_PID_RESET control batch (type 7) of spec
// section 5: value = version int16 (0) and the source cluster ID as an int16-length
// string. It carries no producer ID.
func BuildMirrorPIDReset(sourceClusterID string, leaderEpoch int32, ts int64) Batch {
	v := make([]byte, 4+len(sourceClusterID))
	binary.BigEndian.PutUint16(v[2:], uint16(len(sourceClusterID)))
	copy(v[4:], sourceClusterID)
	return Build(BatchHeader{
		LeaderEpoch: leaderEpoch, Attributes: ControlBit, Timestamp: ts,
		ProducerID: NoProducerID, ProducerEpoch: -1, BaseSequence: NoSequence,
	}, []KV{{Key: ControlKey(ControlMirrorPIDReset), Value: v}})
}
