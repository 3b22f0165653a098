// Package partition holds the replicas this broker hosts: Partition, one replica between
// the request handlers and its storage.Log (Apache Kafka's kafka.cluster.Partition), and
// ReplicaManager, which applies metadata images to them (Kafka's ReplicaManager.applyDelta):
// it opens the logs of partitions assigned to this broker, makes them leaders or followers
// with the leader epoch and partition epoch of their registration, and deletes the logs of
// partitions that left the broker. Every write to a partition — produce, coordinator
// writes, transaction markers, mirror appends and truncations — goes through Partition,
// which refuses it unless this broker is the leader. See ../shared/design/cluster.md §1.
package partition

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/record"
	"github.com/kmirror/kmirror/internal/storage"
)

// Errors of a partition's leader checks, mapped by the handlers to Kafka's codes.
var (
	// ErrNotLeader: this broker does not lead the partition (NOT_LEADER_OR_FOLLOWER).
	ErrNotLeader = errors.New("NOT_LEADER_OR_FOLLOWER")
	// ErrFencedLeaderEpoch: the request's leader epoch is older than the partition's
	// (FENCED_LEADER_EPOCH).
	ErrFencedLeaderEpoch = errors.New("FENCED_LEADER_EPOCH")
	// ErrUnknownLeaderEpoch: the request's leader epoch is newer than the partition's
	// (UNKNOWN_LEADER_EPOCH: this broker has not seen that metadata yet).
	ErrUnknownLeaderEpoch = errors.New("UNKNOWN_LEADER_EPOCH")
)

// Bounds are a partition's log start offset and LEO and the leader epochs of the batches
// holding them (−1 when unknown), as its leader reports them.
type Bounds struct {
	LogStart, LogEnd           int64
	LogStartEpoch, LogEndEpoch int32
}

// Bounds reads the partition's bounds from its log.
func (p *Partition) Bounds() Bounds {
	start, end := p.log.LogStartOffset(), p.log.LogEndOffset()
	return Bounds{LogStart: start, LogEnd: end, LogStartEpoch: p.log.EpochForOffset(start), LogEndEpoch: p.log.EpochForOffset(end)}
}

// Partition is one replica of a partition hosted on this broker: its log and its role
// from the partition's registration in the metadata (leader, replicas, ISR, leader epoch,
// partition epoch). Reads take the log (Log); writes go through the Append*/Truncate*
// methods, which hold the role steady while they run (Kafka's leaderIsrUpdateLock).
type Partition struct {
	topic   string
	index   int32
	topicID metadata.TopicID
	nodeID  int32
	log     *storage.Log

	rm *ReplicaManager // nil for a partition outside a manager (tests)

	mu      sync.RWMutex                                   // writes hold R; role changes hold W
	reg     atomic.Pointer[metadata.PartitionRegistration] // the registration applied last
	leading atomic.Bool                                    // reg.Leader is this broker
	minIsr  atomic.Int32                                   // the topic's min.insync.replicas

	lmu    sync.Mutex   // guards ls, hwHeld and hwOnLead; taken after mu
	ls     *leaderState // nil unless leading
	hwHeld bool         // HoldHighWatermark or HoldOnLead; false unless leading
	// hwOnLead: hwHeld was taken by the ReplicaManager's HoldOnLead when this broker
	// became leader, and no HoldHighWatermark has decided since (written under lmu, read
	// without it as a hint)
	hwOnLead atomic.Bool

	listener atomic.Pointer[func()] // SetReplicaListener
}

func newPartition(topic string, index int32, id metadata.TopicID, nodeID int32, l *storage.Log, rm *ReplicaManager) *Partition {
	p := &Partition{topic: topic, index: index, topicID: id, nodeID: nodeID, log: l, rm: rm}
	p.minIsr.Store(1)
	return p
}

// Topic is the topic name.
func (p *Partition) Topic() string { return p.topic }

// Index is the partition index.
func (p *Partition) Index() int32 { return p.index }

// TopicID is the topic ID.
func (p *Partition) TopicID() metadata.TopicID { return p.topicID }

// Log is the local log, for reads (fetch, offsets, epochs, producer state). Writes go
// through the Partition.
func (p *Partition) Log() *storage.Log { return p.log }

// String is topic-partition.
func (p *Partition) String() string { return fmt.Sprintf("%s-%d", p.topic, p.index) }

// Registration is the partition's registration as last applied; nil before the first.
func (p *Partition) Registration() *metadata.PartitionRegistration { return p.reg.Load() }

// IsLeader reports whether this broker leads the partition.
func (p *Partition) IsLeader() bool { return p.leading.Load() }

// following reports whether this broker follows the partition's leader (a registration
// names another live leader).
func (p *Partition) following() bool {
	r := p.reg.Load()
	return r != nil && !p.leading.Load() && r.Leader != metadata.NoLeader
}

// LeaderEpoch is the partition's leader epoch: the registration's (assigned by the
// controller), or the log's when a local truncation fence raised it above the
// registration until the controller's bump arrives (storage Log.TruncateToFenced).
func (p *Partition) LeaderEpoch() int32 {
	e := p.log.LeaderEpoch()
	if r := p.reg.Load(); r != nil && r.LeaderEpoch > e {
		return r.LeaderEpoch
	}
	return e
}

// CheckLeader returns nil when this broker leads the partition and currentLeaderEpoch
// (−1: not given) matches its leader epoch; else ErrNotLeader, ErrFencedLeaderEpoch or
// ErrUnknownLeaderEpoch (Kafka's Partition.checkCurrentLeaderEpoch).
func (p *Partition) CheckLeader(currentLeaderEpoch int32) error {
	if !p.leading.Load() {
		return ErrNotLeader
	}
	return checkEpoch(currentLeaderEpoch, p.LeaderEpoch())
}

func checkEpoch(requested, current int32) error {
	switch {
	case requested < 0 || requested == current:
		return nil
	case requested < current:
		return ErrFencedLeaderEpoch
	default:
		return ErrUnknownLeaderEpoch
	}
}

// write runs fn while this broker is the leader, the role held steady, then advances the
// high watermark over what fn appended (with no other ISR member it reaches the new LEO
// at once); ErrNotLeader otherwise.
func (p *Partition) write(fn func() error) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.leading.Load() {
		return ErrNotLeader
	}
	err := fn()
	p.lmu.Lock()
	if p.ls != nil {
		p.maybeIncrementHighWatermark(time.Now().UnixMilli())
	}
	p.lmu.Unlock()
	return err
}

// LeaderAppend is what an append as leader wrote: the log's AppendInfo and the leader
// epoch it was written with (WaitReplicated's argument for acks=all).
type LeaderAppend struct {
	storage.AppendInfo
	LeaderEpoch int32
}

// AppendAsLeader appends a validated client batch with the partition's leader epoch
// (storage Log.AppendAsLeader; logAppendTimeMs −1 keeps CreateTime). With acksAll the ISR
// must hold the effective min.insync.replicas first (ErrNotEnoughReplicas, nothing
// appended); the caller then waits with WaitReplicated. Errors: ErrNotLeader and the
// log's.
func (p *Partition) AppendAsLeader(b record.Batch, logAppendTimeMs int64, acksAll bool) (la LeaderAppend, err error) {
	err = p.write(func() error {
		if acksAll {
			if err := p.checkAcksAll(); err != nil {
				return err
			}
		}
		la.LeaderEpoch = p.LeaderEpoch()
		la.AppendInfo, err = p.log.AppendAsLeader(b, la.LeaderEpoch, logAppendTimeMs)
		return err
	})
	return la, err
}

// AppendRecordsAsLeader appends recs in one uncompressed batch without a producer (the
// coordinators' writes to __consumer_offsets, __transaction_state and __mirror_state)
// with acks=all (appendReplicated) and returns its first offset.
func (p *Partition) AppendRecordsAsLeader(ctx context.Context, recs []record.KV, timestampMs int64) (int64, error) {
	b := record.Build(record.BatchHeader{ProducerID: record.NoProducerID, ProducerEpoch: -1, BaseSequence: record.NoSequence, Timestamp: timestampMs}, recs)
	info, err := p.appendReplicated(ctx, func(epoch int32) (storage.AppendInfo, error) { return p.log.AppendAsLeader(b, epoch, -1) })
	return info.FirstOffset, err
}

// AppendAsCoordinator appends a batch a coordinator of this broker wrote with a producer
// ID (the group coordinator's transactional offset commits; storage
// Log.AppendAsCoordinator), with the partition's leader epoch, with acks=all.
func (p *Partition) AppendAsCoordinator(ctx context.Context, b record.Batch) (storage.AppendInfo, error) {
	return p.appendReplicated(ctx, func(epoch int32) (storage.AppendInfo, error) { return p.log.AppendAsCoordinator(b, epoch) })
}

// AppendControlAsLeader appends a control batch (a transaction marker or
// MIRROR_PID_RESET) with the partition's leader epoch, with acks=all as Kafka writes
// transaction markers.
func (p *Partition) AppendControlAsLeader(ctx context.Context, b record.Batch) (storage.AppendInfo, error) {
	return p.appendReplicated(ctx, func(epoch int32) (storage.AppendInfo, error) { return p.log.AppendControlAsLeader(b, epoch) })
}

// appendReplicated is an acks=all write of the broker's own (Kafka's coordinators and
// marker writes append with requiredAcks −1): fn appends at the leader epoch it is given
// once the ISR holds min.insync.replicas (ErrNotEnoughReplicas otherwise), then
// WaitReplicated waits, until ctx ends, for the ISR to have it. A write that times out
// or loses its ISR may still be in the log.
func (p *Partition) appendReplicated(ctx context.Context, fn func(leaderEpoch int32) (storage.AppendInfo, error)) (info storage.AppendInfo, err error) {
	var epoch int32
	err = p.write(func() error {
		if err := p.checkAcksAll(); err != nil {
			return err
		}
		epoch = p.LeaderEpoch()
		info, err = fn(epoch)
		return err
	})
	if err != nil || info.LastOffset < 0 {
		return info, err
	}
	return info, p.WaitReplicated(ctx, epoch, info.LastOffset+1)
}

// AppendMirrored appends record batches fetched from a mirror's source, bytes and
// offsets kept (storage Log.AppendAsFollowerVerified: the fetcher has checked their
// CRCs). Only the leader of a mirror partition appends them (spec section 3).
func (p *Partition) AppendMirrored(batches []byte) (info storage.AppendInfo, err error) {
	err = p.write(func() error {
		info, err = p.log.AppendAsFollowerVerified(batches)
		return err
	})
	return info, err
}

// TruncateTo truncates the log to offset (mirror LOG_ALIGNMENT, spec section 4).
func (p *Partition) TruncateTo(offset int64) error {
	return p.write(func() error { return p.log.TruncateTo(offset) })
}

// TruncateToFenced truncates the log to offset and, when records go, raises the leader
// epoch by one in the same step for readers (storage Log.TruncateToFenced); the caller
// asks the controller to bump the registration's epoch to LeaderEpoch after it.
func (p *Partition) TruncateToFenced(offset int64) error {
	return p.write(func() error {
		if err := p.log.TruncateToFenced(offset); err != nil {
			return err
		}
		p.forgetLongerFollowers()
		return nil
	})
}

// TruncateFullyAndStartAt empties the log and restarts it at offset (a mirror whose
// position fell below the source's log start).
func (p *Partition) TruncateFullyAndStartAt(offset int64) error {
	return p.write(func() error { return p.log.TruncateFullyAndStartAt(offset) })
}

// AdvanceLogStartOffset moves the log start offset forward (DeleteRecords, the source's
// log start of a mirror partition).
func (p *Partition) AdvanceLogStartOffset(offset int64) error {
	return p.write(func() error { return p.log.AdvanceLogStartOffset(offset) })
}

// HighWatermarkAndLSO are the high watermark and the last stable offset (storage
// Log.HighWatermarkAndLSO): the leader advances the HW as its ISR replicates, a follower
// takes the leader's.
func (p *Partition) HighWatermarkAndLSO() (hw, lso int64) { return p.log.HighWatermarkAndLSO() }

// become applies a registration: the leader role when reg.Leader is this broker (Kafka's
// Partition.makeLeader), the follower role otherwise (makeFollower). A new leader epoch
// above every epoch in the log is recorded where it starts, at the LEO (Kafka's
// maybeAssignEpochStartOffset; a fence in storage, since the leader-epoch cache of a
// mirror partition holds only batch epochs). A new leader epoch resets what the leader
// knows of its followers; a newer partition epoch at the same leader epoch (an ISR or
// assignment change) keeps it, and an older one than the leader already has (its own
// AlterPartition answered first) changes nothing. minIsr is the topic's
// min.insync.replicas. A broker that was not leading and leads now starts with its high
// watermark held when holdOnLead (nil: never) says so, under the partition's locks
// (ReplicaManager.SetHoldOnLead); losing the leadership drops any hold. It reports
// whether the role or the leader epoch changed.
func (p *Partition) become(reg *metadata.PartitionRegistration, minIsr int32, holdOnLead func() bool) (changed bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.reg.Load()
	leading := reg.Leader == p.nodeID
	if leading && reg.LeaderEpoch > p.log.LeaderEpoch() {
		if err := p.log.RaiseLeaderEpoch(reg.LeaderEpoch); err != nil {
			return false, fmt.Errorf("%s: recording leader epoch %d: %w", p, reg.LeaderEpoch, err)
		}
	}
	newLeader := leading && !p.leading.Load()
	changed = old == nil || leading != p.leading.Load() || old.LeaderEpoch != reg.LeaderEpoch
	p.minIsr.Store(max(minIsr, 1))
	now := time.Now().UnixMilli()
	recovering := reg.LeaderRecoveryState == metadata.LeaderRecovering
	p.lmu.Lock()
	switch {
	case !leading:
		p.ls = nil
		p.hwHeld = false // a hold is the leader's: a new leader decides for itself
		p.hwOnLead.Store(false)
	case changed || p.ls == nil:
		p.resetLeaderState(reg.Replicas, reg.ISR, recovering, now)
		p.ls.partitionEpoch = reg.PartitionEpoch
		if newLeader {
			// held from the first moment it leads, before any follower fetches from it,
			// when its owner may still have to decide (a mirror partition whose log may
			// be untrusted, cluster.md §3); a new leader epoch of the same leader keeps
			// the hold it has
			p.hwHeld = holdOnLead != nil && holdOnLead()
			p.hwOnLead.Store(p.hwHeld)
		}
	case reg.PartitionEpoch > p.ls.partitionEpoch:
		p.updateAssignment(reg.Replicas, reg.ISR, recovering, now)
		p.ls.partitionEpoch = reg.PartitionEpoch
	}
	if p.ls != nil {
		p.maybeIncrementHighWatermark(now)
		if p.ls.isr.recovering && p.ls.isr.proposed == nil {
			// Elected uncleanly: this leader's log is the partition's now; tell the
			// controller it recovered (KIP-704), with the ISR it has.
			p.proposeIsr(slices.Clone(p.ls.isr.isr), false)
		}
	}
	p.lmu.Unlock()
	p.reg.Store(reg)
	p.leading.Store(leading)
	if changed {
		p.log.Wake() // parked fetches and produces re-check the role
	}
	p.notifyListener()
	return changed, nil
}

// setMinIsr applies a change of the topic's min.insync.replicas at once, as Kafka reads
// the log config on every check: a leader whose ISR now meets it advances its high
// watermark without waiting for the next write or follower fetch.
func (p *Partition) setMinIsr(minIsr int32) {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	v := max(minIsr, 1)
	if p.minIsr.Swap(v) != v && p.ls != nil {
		p.maybeIncrementHighWatermark(time.Now().UnixMilli())
	}
}

// stop resigns whatever role the partition had (deleted, or moved off this broker).
func (p *Partition) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leading.Store(false)
	p.lmu.Lock()
	p.ls = nil
	p.hwHeld = false
	p.hwOnLead.Store(false)
	p.lmu.Unlock()
	p.log.Wake()
}
