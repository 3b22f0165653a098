package mirrorproto

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds MirrorLeaderEpoch, the one field Cluster Mirroring adds to Fetch
// (spec section 6, cluster.md §3): the leader of a mirror partition tells its followers
// the latest leader epoch of its log (the source's epoch of its last mirrored batch),
// and a follower appends the mirrored batches up to that epoch, not up to its own
// (destination) leader epoch.
//
// The spec names it a Fetch v19 tagged field. Apache Kafka 4.4 and franz-go top out at
// Fetch v18 and have no such field, so kmirror carries it as a tagged field of the
// response partition at every flexible version (12+) it serves, between kmirror brokers
// only: clients that do not know the tag skip it, as KIP-482 requires.

// MirrorLeaderEpochTag is the tag of MirrorLeaderEpoch (int32) in a FetchResponse
// partition: the KIP's number, clear of the tags Apache Kafka uses there (0–2).
const MirrorLeaderEpochTag uint32 = 1279

// SetMirrorLeaderEpoch sets MirrorLeaderEpoch in a FetchResponse partition's tags.
func SetMirrorLeaderEpoch(tags *kmsg.Tags, epoch int32) {
	tags.Set(MirrorLeaderEpochTag, binary.BigEndian.AppendUint32(make([]byte, 0, 4), uint32(epoch)))
}

// MirrorLeaderEpoch returns MirrorLeaderEpoch from a FetchResponse partition's tags;
// ok is false when the leader sent none (not a mirror partition, or a size other than
// an int32's).
func MirrorLeaderEpoch(tags *kmsg.Tags) (epoch int32, ok bool) {
	if tags.Len() == 0 {
		return -1, false
	}
	tags.Each(func(key uint32, val []byte) {
		if key == MirrorLeaderEpochTag && len(val) == 4 {
			epoch, ok = int32(binary.BigEndian.Uint32(val)), true
		}
	})
	if !ok {
		return -1, false
	}
	return epoch, true
}
