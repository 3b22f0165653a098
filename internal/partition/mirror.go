package partition

// What the leader of a mirror partition asks of its replicas (cluster.md §3): LOG_ALIGNMENT
// ends only once the ISR holds min.insync.replicas (every replica with
// mirror.support.unclean.leader.election) and no ISR member or caught-up replica has a log
// longer than the leader's; the mirror re-checks on the notifications of
// SetReplicaListener.

import (
	"fmt"
	"slices"
	"time"
)

// SetReplicaListener installs fn (nil removes it), called after every follower fetch this
// leader records, every ISR change it commits and every role or leader epoch change: the
// moments MirrorAlignmentWait's answer can change. fn runs with the partition's locks held:
// it must not block nor call into the partition (a non-blocking channel send).
func (p *Partition) SetReplicaListener(fn func()) {
	if fn == nil {
		p.listener.Store(nil)
		return
	}
	p.listener.Store(&fn)
}

// notifyListener calls the replica listener, if any.
func (p *Partition) notifyListener() {
	if fn := p.listener.Load(); fn != nil {
		(*fn)()
	}
}

// MirrorAlignmentWait returns "" when the replicas allow a mirror partition this broker
// leads to leave LOG_ALIGNMENT, else why it waits (cluster.md §3):
//   - phase 1: the ISR has at least the effective min.insync.replicas members, or, with
//     all (mirror.support.unclean.leader.election=true), every replica; a partition without
//     followers goes on at once;
//   - with leos (phase 2, after the leader's own truncation), also: every ISR member and
//     every caught-up replica (every replica with all) has fetched at the current leader
//     epoch from an offset at or below the leader's LEO. A follower with a longer log gets
//     there by DivergingEpoch (the leader's truncation raised the epoch), and the fetch it
//     then sends from its truncated log is the one recorded: a fetch answered with a
//     diverging epoch records nothing, and a new leader epoch forgets every follower's LEO.
func (p *Partition) MirrorAlignmentWait(all, leos bool) string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.leading.Load() {
		return "this broker does not lead the partition"
	}
	p.lmu.Lock()
	defer p.lmu.Unlock()
	ls := p.ls
	if ls == nil {
		return "this broker does not lead the partition"
	}
	if len(ls.replicas) == 0 {
		return ""
	}
	isr := ls.isr.isr
	switch {
	case all && len(isr) < len(ls.replicas)+1:
		return fmt.Sprintf("mirror.support.unclean.leader.election: the ISR %v is not every replica", isr)
	case len(isr) < p.effectiveMinIsr():
		return fmt.Sprintf("the ISR %v is below min.insync.replicas %d", isr, p.effectiveMinIsr())
	case !leos:
		return ""
	}
	leo := p.log.LogEndOffset()
	now := time.Now().UnixMilli()
	maximal := ls.isr.maximal()
	ids := make([]int32, 0, len(ls.replicas))
	for id := range ls.replicas {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		rs := ls.replicas[id]
		inIsr := slices.Contains(maximal, id)
		if !all && !inIsr && !(rs.leo >= 0 && rs.caughtUp(leo, now, p.maxLagMs())) {
			continue // out of the ISR and behind: it truncates before it can rejoin
		}
		switch {
		case rs.leo < 0:
			return fmt.Sprintf("replica %d has not fetched at leader epoch %d yet", id, p.LeaderEpoch())
		case rs.leo > leo:
			return fmt.Sprintf("replica %d holds a log to offset %d, above the leader's %d", id, rs.leo, leo)
		}
	}
	return ""
}

// forgetLongerFollowers marks the LEO of every follower past the leader's as unknown, after
// the leader's own truncation (a mirror's LOG_ALIGNMENT or a source divergence): their
// tails are not the leader's records, so they hold the high watermark where it is until
// they fetch again. lmu not held.
func (p *Partition) forgetLongerFollowers() {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	if p.ls == nil {
		return
	}
	leo := p.log.LogEndOffset()
	for _, rs := range p.ls.replicas {
		if rs.leo > leo {
			rs.leo = unknownOffset
		}
	}
}

// HoldHighWatermark holds (hold true) or releases the HW of the partition this broker
// leads. While held, the HW does not advance — not on appends, follower fetches or ISR
// changes — so no record above it becomes readable; followers take the leader's HW, so
// it holds on every replica. A release advances it at once to what the ISR has. The
// mirror holds it while LOG_ALIGNMENT has not yet truncated an untrusted log (failback:
// the records past the truncation point must never be readable, cluster.md §3). A hold
// lasts only while this broker leads: on a broker that does not lead the partition it is
// ignored, and losing the leadership drops it; a new leader starts held only when the
// ReplicaManager's HoldOnLead says so, and the first HoldHighWatermark then decides in
// its place. A truncation brings the HW down to the new LEO, held or not.
func (p *Partition) HoldHighWatermark(hold bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	p.lmu.Lock()
	if !p.leading.Load() || p.ls == nil {
		p.lmu.Unlock()
		return
	}
	p.setHold(hold)
	p.lmu.Unlock()
}

// ReleaseOwnedHold releases a hold that HoldHighWatermark set, and leaves one the
// partition took on becoming leader that no HoldHighWatermark has decided on since
// (ReplicaManager.SetHoldOnLead): an owner that gives the partition up (a mirror runtime
// dropped) must not release the hold of a later leadership, which its next owner decides.
func (p *Partition) ReleaseOwnedHold() {
	p.mu.RLock()
	defer p.mu.RUnlock()
	p.lmu.Lock()
	defer p.lmu.Unlock()
	if !p.leading.Load() || p.ls == nil || p.hwOnLead.Load() {
		return
	}
	p.setHold(false)
}

// setHold sets the hold as its owner decides, advancing the HW on a release. lmu held.
func (p *Partition) setHold(hold bool) {
	was := p.hwHeld
	p.hwHeld = hold
	p.hwOnLead.Store(false)
	if was && !hold {
		p.maybeIncrementHighWatermark(time.Now().UnixMilli())
	}
}

// settleHoldOnLead brings a hold HoldOnLead took (no HoldHighWatermark decided since) in
// line with hold, evaluated under the locks: released when hold says no more. With take,
// a leader that holds nothing yet takes the hold when hold says so, as at become (a
// HoldOnLead registered after the leadership). mu and lmu not held.
func (p *Partition) settleHoldOnLead(hold func() bool, take bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	p.lmu.Lock()
	defer p.lmu.Unlock()
	if !p.leading.Load() || p.ls == nil {
		return
	}
	switch {
	case p.hwOnLead.Load():
		if !hold() {
			p.setHold(false)
		}
	case take && !p.hwHeld && hold():
		p.hwHeld = true
		p.hwOnLead.Store(true)
	}
}

// HighWatermarkHeld reports whether HoldHighWatermark holds the HW.
func (p *Partition) HighWatermarkHeld() bool {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	return p.hwHeld
}
