package partition

// The leader's side of replication (Kafka's Partition: remoteReplicasMap, partitionState,
// updateFollowerFetchState, maybeExpandIsr, maybeShrinkIsr, maybeIncrementLeaderHW and
// checkEnoughReplicasReachOffset). See ../shared/design/cluster.md §2 and
// docs/replication.md.

import (
	"context"
	"errors"
	"slices"
)

// Errors of the replication checks, mapped by the handlers to Kafka's codes.
var (
	// ErrNotEnoughReplicas: an acks=all write with fewer ISR members than the effective
	// min.insync.replicas, refused before the append (NOT_ENOUGH_REPLICAS).
	ErrNotEnoughReplicas = errors.New("NOT_ENOUGH_REPLICAS")
	// ErrNotEnoughReplicasAfterAppend: an acks=all write was appended and reached the high
	// watermark, but the ISR had shrunk below min.insync.replicas meanwhile
	// (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
	ErrNotEnoughReplicasAfterAppend = errors.New("NOT_ENOUGH_REPLICAS_AFTER_APPEND")
	// ErrNotReplica: a follower fetch from a broker that holds no replica of the
	// partition (Kafka's Partition.followerReplicaOrThrow: UNKNOWN_LEADER_EPOCH when the
	// fetch names a leader epoch, NOT_LEADER_OR_FOLLOWER when it does not).
	ErrNotReplica = errors.New("not a replica of the partition")
	// ErrStaleBrokerEpoch: a follower fetch with a broker epoch older than the one its
	// broker is registered with, unfenced, or than its last fetch's (Kafka's
	// Replica.updateFetchStateOrThrow: NOT_LEADER_OR_FOLLOWER).
	ErrStaleBrokerEpoch = errors.New("NOT_LEADER_OR_FOLLOWER: stale broker epoch")
)

// unknownOffset is an offset the leader has not learned yet (Kafka's UnknownOffset).
const unknownOffset = -1

// replicaState is the leader's view of one follower (Kafka's ReplicaState): where its log
// ends, by its last fetch, and when it was last caught up with the leader.
type replicaState struct {
	brokerEpoch        int64 // ReplicaState.ReplicaEpoch of its last fetch, −1 unknown
	leo                int64 // its LEO: the FetchOffset of its last fetch
	logStartOffset     int64
	lastFetchLeaderLEO int64 // the leader's LEO when it read that fetch
	lastFetchTimeMs    int64
	lastCaughtUpTimeMs int64
}

// caughtUp is Kafka's ReplicaState.isCaughtUp: the follower has the leader's LEO, or had
// all of the leader's log less than maxLagMs ago.
func (r *replicaState) caughtUp(leaderLEO, nowMs, maxLagMs int64) bool {
	return r.leo == leaderLEO || nowMs-r.lastCaughtUpTimeMs <= maxLagMs
}

// isrState is the ISR as committed in the metadata and the change in flight, if any
// (Kafka's CommittedPartitionState / PendingExpandIsr / PendingShrinkIsr).
type isrState struct {
	isr      []int32 // committed
	proposed []int32 // the ISR of the AlterPartition in flight; nil when none
	expand   bool    // proposed adds a member (it counts for the HW at once)
	// recovering: the partition was elected uncleanly (LeaderRecoveryState RECOVERING)
	// and the controller has not been told yet that the leader recovered.
	recovering bool
}

// maximal is the ISR the high watermark waits for: the committed ISR, and the member a
// pending expansion adds (a pending shrink still waits for the members it removes).
func (s *isrState) maximal() []int32 {
	if s.proposed != nil && s.expand {
		return s.proposed
	}
	return s.isr
}

// leaderState is everything a leader keeps about replication; Partition.lmu guards it.
type leaderState struct {
	replicas             map[int32]*replicaState // the followers, by broker ID
	isr                  isrState
	partitionEpoch       int32 // of the registration or AlterPartition answer applied last
	leaderEpochStartOffs int64 // the LEO when this leader epoch began
}

// resetLeaderState starts leading at leader epoch reg.LeaderEpoch (Kafka's makeLeader with
// a new leader epoch): followers' LEOs are unknown until they fetch, members of the ISR
// count as caught up now. lmu held.
func (p *Partition) resetLeaderState(replicas, isr []int32, recovering bool, nowMs int64) {
	ls := &leaderState{replicas: map[int32]*replicaState{}, leaderEpochStartOffs: p.log.LogEndOffset()}
	for _, id := range replicas {
		if id == p.nodeID {
			continue
		}
		rs := &replicaState{brokerEpoch: -1, leo: unknownOffset, logStartOffset: unknownOffset, lastFetchLeaderLEO: unknownOffset}
		if slices.Contains(isr, id) {
			rs.lastCaughtUpTimeMs = nowMs
		}
		ls.replicas[id] = rs
	}
	ls.isr = isrState{isr: slices.Clone(isr), recovering: recovering}
	p.ls = ls
}

// updateAssignment applies a registration with this broker's current leader epoch and a
// newer partition epoch (an ISR change committed, or replicas added or removed): the
// followers keep their state (Kafka's makeLeader without a new leader epoch). lmu held.
func (p *Partition) updateAssignment(replicas, isr []int32, recovering bool, nowMs int64) {
	ls := p.ls
	next := map[int32]*replicaState{}
	for _, id := range replicas {
		if id == p.nodeID {
			continue
		}
		if rs := ls.replicas[id]; rs != nil {
			next[id] = rs
			continue
		}
		next[id] = &replicaState{brokerEpoch: -1, leo: unknownOffset, logStartOffset: unknownOffset, lastFetchLeaderLEO: unknownOffset}
	}
	ls.replicas = next
	ls.isr = isrState{isr: slices.Clone(isr), recovering: recovering}
}

// FollowerFetch is one partition of a follower's Fetch, as the leader records it.
type FollowerFetch struct {
	ReplicaID      int32 // ReplicaState.ReplicaId
	BrokerEpoch    int64 // ReplicaState.ReplicaEpoch, −1 when not sent
	FetchOffset    int64 // the follower's LEO
	LogStartOffset int64 // the follower's log start offset
	LeaderLEO      int64 // this leader's LEO read before the fetch's records were read
	NowMs          int64
}

// CheckFollower returns nil when replicaID holds a replica of this partition, which this
// broker leads, and brokerEpoch (−1: not sent) is not stale (checkFollower); else
// ErrNotLeader, ErrNotReplica or ErrStaleBrokerEpoch. It changes nothing: the fetch records its position
// with UpdateFollowerFetchState after reading.
func (p *Partition) CheckFollower(replicaID int32, brokerEpoch int64) error {
	if !p.leading.Load() {
		return ErrNotLeader
	}
	p.lmu.Lock()
	defer p.lmu.Unlock()
	if p.ls == nil {
		return ErrNotLeader
	}
	return p.checkFollower(p.ls.replicas[replicaID], replicaID, brokerEpoch)
}

// checkFollower is CheckFollower's test of follower id's state rs (nil: not a replica).
// A broker epoch (−1: not sent) older than the one the image registers the broker with,
// unfenced (Kafka's metadataCache.getAliveBrokerEpoch), is stale, as is one older than
// the follower's last fetch's. lmu held.
func (p *Partition) checkFollower(rs *replicaState, id int32, brokerEpoch int64) error {
	if rs == nil {
		return ErrNotReplica
	}
	if brokerEpoch < 0 {
		return nil
	}
	if brokerEpoch < rs.brokerEpoch {
		return ErrStaleBrokerEpoch
	}
	if p.rm != nil {
		if br, ok := p.rm.Image().Broker(id); ok && !br.Fenced && br.Epoch > brokerEpoch {
			return ErrStaleBrokerEpoch
		}
	}
	return nil
}

// UpdateFollowerFetchState records a follower's fetch (Kafka's updateFollowerFetchState):
// its LEO and log start offset, and when it was last caught up — at this fetch if it
// asked from the leader's LEO of that moment, at its previous fetch if it asked from the
// LEO the leader had then. It then adds the follower to the ISR if it caught up
// (maybeExpandIsr, through the controller) and advances the high watermark; errors as
// CheckFollower. A fetch that answered a diverging epoch is not recorded.
func (p *Partition) UpdateFollowerFetchState(f FollowerFetch) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.leading.Load() {
		return ErrNotLeader
	}
	p.lmu.Lock()
	ls := p.ls
	if ls == nil {
		p.lmu.Unlock()
		return ErrNotLeader
	}
	rs := ls.replicas[f.ReplicaID]
	if err := p.checkFollower(rs, f.ReplicaID, f.BrokerEpoch); err != nil {
		p.lmu.Unlock()
		return err
	}
	switch {
	case f.FetchOffset >= f.LeaderLEO:
		rs.lastCaughtUpTimeMs = max(rs.lastCaughtUpTimeMs, f.NowMs)
	case f.FetchOffset >= rs.lastFetchLeaderLEO:
		rs.lastCaughtUpTimeMs = max(rs.lastCaughtUpTimeMs, rs.lastFetchTimeMs)
	}
	rs.leo, rs.logStartOffset = f.FetchOffset, f.LogStartOffset
	rs.lastFetchLeaderLEO, rs.lastFetchTimeMs = f.LeaderLEO, f.NowMs
	if f.BrokerEpoch >= 0 {
		rs.brokerEpoch = f.BrokerEpoch
	}
	p.maybeExpandIsr(f.ReplicaID, rs)
	p.maybeIncrementHighWatermark(f.NowMs)
	p.lmu.Unlock()
	p.notifyListener()
	return nil
}

// maybeExpandIsr proposes adding a follower that is not in the ISR once it is in sync:
// its LEO has reached the high watermark and the start of this leader epoch, and its
// broker is eligible (registered with that broker epoch, unfenced, not shutting down).
// One ISR change is in flight at a time. lmu held.
func (p *Partition) maybeExpandIsr(id int32, rs *replicaState) {
	ls := p.ls
	if ls.isr.proposed != nil || slices.Contains(ls.isr.isr, id) {
		return
	}
	if rs.leo < p.log.HighWatermark() || rs.leo < ls.leaderEpochStartOffs {
		return
	}
	if p.rm == nil || !p.rm.isrEligible(id, rs.brokerEpoch) {
		return
	}
	next := append(slices.Clone(ls.isr.isr), id)
	slices.Sort(next)
	p.proposeIsr(next, true)
}

// maybeShrinkIsr proposes removing the followers of the ISR that have not been caught up
// for maxLagMs (Kafka's maybeShrinkIsr, run every replica.lag.time.max.ms / 2).
func (p *Partition) maybeShrinkIsr(nowMs, maxLagMs int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.leading.Load() {
		return
	}
	p.lmu.Lock()
	defer p.lmu.Unlock()
	ls := p.ls
	if ls == nil || ls.isr.proposed != nil {
		return
	}
	leo := p.log.LogEndOffset()
	var keep []int32
	for _, id := range ls.isr.isr {
		if rs := ls.replicas[id]; rs != nil && !rs.caughtUp(leo, nowMs, maxLagMs) {
			p.rm.log.Info("shrinking the ISR: a follower is not caught up", "partition", p.String(), "follower", id,
				"followerLEO", rs.leo, "leaderLEO", leo, "lastCaughtUpMs", rs.lastCaughtUpTimeMs)
			continue
		}
		keep = append(keep, id)
	}
	if len(keep) < len(ls.isr.isr) {
		p.proposeIsr(keep, false)
	}
}

// effectiveMinIsr is min.insync.replicas bounded by the replication factor (Kafka's
// effectiveMinIsr). lmu held.
func (p *Partition) effectiveMinIsr() int {
	return min(int(p.minIsr.Load()), len(p.ls.replicas)+1)
}

// maybeIncrementHighWatermark advances the high watermark to the lowest LEO of the leader
// and the followers it waits for — the (maximal) ISR, and followers caught up and
// eligible to join it — and never backward; with fewer ISR members than the effective
// min.insync.replicas, or while HoldHighWatermark holds it, it does not move (cluster.md
// §2, §3). lmu held.
func (p *Partition) maybeIncrementHighWatermark(nowMs int64) bool {
	ls := p.ls
	if p.hwHeld || len(ls.isr.isr) < p.effectiveMinIsr() {
		return false
	}
	leo := p.log.LogEndOffset()
	hw := leo
	maximal := ls.isr.maximal()
	for id, rs := range ls.replicas {
		if rs.leo >= hw {
			continue
		}
		if slices.Contains(maximal, id) || (rs.caughtUp(leo, nowMs, p.maxLagMs()) && p.rm != nil && p.rm.isrEligible(id, rs.brokerEpoch)) {
			hw = rs.leo
		}
	}
	return p.log.UpdateHighWatermark(hw)
}

// maxLagMs is replica.lag.time.max.ms.
func (p *Partition) maxLagMs() int64 {
	if p.rm == nil {
		return defaultReplicaLagTimeMaxMs
	}
	return p.rm.opts.ReplicaLagTimeMaxMs
}

// checkAcksAll refuses an acks=all write before its append when the ISR is smaller than
// the effective min.insync.replicas (Kafka's appendRecordsToLeader).
func (p *Partition) checkAcksAll() error {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	if p.ls != nil && len(p.ls.isr.isr) < p.effectiveMinIsr() {
		return ErrNotEnoughReplicas
	}
	return nil
}

// WaitReplicated waits until the high watermark reaches offset (the end of an acks=all
// write) — on the log's notifications, never a sleep — and answers as Kafka's
// checkEnoughReplicasReachOffset: nil, ErrNotEnoughReplicasAfterAppend when the ISR fell
// below min.insync.replicas meanwhile, ErrNotLeader when this broker stopped leading or
// the leader epoch changed (the write may be lost), or ctx's error (REQUEST_TIMED_OUT).
func (p *Partition) WaitReplicated(ctx context.Context, leaderEpoch int32, offset int64) error {
	for {
		ch := p.log.Changed()
		if !p.leading.Load() || p.LeaderEpoch() != leaderEpoch {
			return ErrNotLeader
		}
		if p.log.HighWatermark() >= offset {
			p.lmu.Lock()
			short := p.ls != nil && len(p.ls.isr.isr) < p.effectiveMinIsr()
			p.lmu.Unlock()
			if short {
				return ErrNotEnoughReplicasAfterAppend
			}
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// LeaderEpochStartOffset is the LEO at which this broker's current leader epoch began
// (Kafka's leaderEpochStartOffsetOpt), −1 when it does not lead.
func (p *Partition) LeaderEpochStartOffset() int64 {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	if p.ls == nil {
		return -1
	}
	return p.ls.leaderEpochStartOffs
}

// ISR is the committed ISR (a copy), or the registration's on a follower.
func (p *Partition) ISR() []int32 {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	if p.ls != nil && p.leading.Load() {
		return slices.Clone(p.ls.isr.isr)
	}
	if r := p.reg.Load(); r != nil {
		return slices.Clone(r.ISR)
	}
	return nil
}
