package partition

// The follower's side of replication: what a replica fetcher does to the local log
// (Kafka's ReplicaFetcherThread.processPartitionData, truncate and
// truncateFullyAndStartAt). Each call names the leader epoch the fetcher fetched at; a
// call for an epoch the partition no longer follows changes nothing (the fetcher's state
// is stale: the metadata moved on).

import (
	"errors"

	"github.com/kmirror/kmirror/internal/record"
	"github.com/kmirror/kmirror/internal/storage"
)

// ErrNotFollower: the partition does not follow a leader at the fetch's leader epoch
// any more (it leads, follows at another epoch, or left this broker); the fetcher drops
// what it fetched.
var ErrNotFollower = errors.New("the partition no longer follows at that leader epoch")

// followWrite runs fn while the partition follows at leaderEpoch, the role held steady.
func (p *Partition) followWrite(leaderEpoch int32, fn func() error) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	r := p.reg.Load()
	if p.leading.Load() || r == nil || r.LeaderEpoch != leaderEpoch {
		return ErrNotFollower
	}
	return fn()
}

// AppendAsFollower appends record batches fetched from the leader at leaderEpoch, bytes
// and offsets kept (storage Log.AppendAsFollower: CRCs and offsets checked). Batches from
// the first one whose leader epoch is above maxBatchEpoch on are left out: maxBatchEpoch
// is leaderEpoch (KAFKA-18723: a leader that moved to a newer epoch than this follower
// knows may already have written with it) or, on a mirror partition, the
// MirrorLeaderEpoch the leader answered (spec section 6: mirrored batches carry the
// source's epochs). The fetcher fetches the rest again. It returns the AppendInfo of
// what was appended (FirstOffset −1 when nothing was). Errors: ErrNotFollower and the
// log's.
func (p *Partition) AppendAsFollower(leaderEpoch, maxBatchEpoch int32, batches []byte) (info storage.AppendInfo, err error) {
	info.FirstOffset, info.LastOffset = -1, -1
	err = p.followWrite(leaderEpoch, func() error {
		n := 0
		it := record.IterBatches(batches)
		for it.Next() {
			if it.Batch().LeaderEpoch() > maxBatchEpoch {
				break
			}
			n = it.Pos() + it.Batch().Size()
		}
		if n == 0 {
			return nil
		}
		info, err = p.log.AppendAsFollower(batches[:n])
		return err
	})
	return info, err
}

// UpdateFollowerHighWatermark takes the leader's high watermark and log start offset
// from a fetch answer (Kafka's processPartitionData): the HW becomes min(leader's HW,
// local LEO) and the log start offset moves up to the leader's, never past the HW.
func (p *Partition) UpdateFollowerHighWatermark(leaderEpoch int32, leaderHW, leaderLogStart int64) error {
	return p.followWrite(leaderEpoch, func() error {
		p.log.UpdateHighWatermark(min(leaderHW, p.log.LogEndOffset()))
		if start := min(leaderLogStart, p.log.HighWatermark()); start > p.log.LogStartOffset() {
			return p.log.AdvanceLogStartOffset(start)
		}
		return nil
	})
}

// TruncateAsFollower truncates the log to offset: where it diverges from the leader's
// (DivergingEpoch), or to the leader's LEO when the follower's is past it.
func (p *Partition) TruncateAsFollower(leaderEpoch int32, offset int64) error {
	return p.followWrite(leaderEpoch, func() error { return p.log.TruncateTo(offset) })
}

// TruncateFullyAsFollower empties the log and restarts it at offset: the follower's
// position fell below the leader's log start offset.
func (p *Partition) TruncateFullyAsFollower(leaderEpoch int32, offset int64) error {
	return p.followWrite(leaderEpoch, func() error { return p.log.TruncateFullyAndStartAt(offset) })
}
