package mirror

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/storage"
)

// fetchDivergingEpochVersion is the first Fetch version with LastFetchedEpoch and
// DivergingEpoch (KIP-595, Apache Kafka 2.7). Below it the source's truncations are
// found with OffsetForLeaderEpoch instead (spec section 3).
const fetchDivergingEpochVersion = 12

// maxEpochCheckRounds bounds the OffsetForLeaderEpoch rounds of one check: each round
// after the first asks for a smaller epoch (Kafka's follower asks again with the epoch
// of its own it truncated to), so a few suffice.
const maxEpochCheckRounds = 8

// epochAsk is one partition's pending OffsetForLeaderEpoch question.
type epochAsk struct {
	p        *partition
	epoch    int32 // the epoch asked for: the last appended batch's, then a smaller one
	leo      int64 // the local LEO when asked: an answer for another LEO is stale
	srcEpoch int32 // the source leader epoch the check is for
}

// needsEpochCheck reports whether p must be checked for source truncation before its
// next fetch from source broker broker. mu held.
func (p *partition) needsEpochCheck(broker int32) bool {
	return !p.epochChecked || p.epochCheckBroker != broker || p.epochCheckEpoch != p.srcLeaderEpoch.Load()
}

// anyNeedsEpochCheck reports whether a partition of ps needs the truncation check.
func (f *fetcher) anyNeedsEpochCheck(ps []*partition) bool {
	for _, p := range ps {
		p.mu.Lock()
		need := p.needsEpochCheck(f.key.broker)
		p.mu.Unlock()
		if need {
			return true
		}
	}
	return false
}

// checkEpochs is the truncation check for a source without Fetch v12, as Kafka's replica
// fetcher did before KIP-595 (AbstractFetcherThread.maybeTruncate): before the first fetch
// from a source leader, after a source leader epoch change and after
// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, every such partition asks the leader
// with OffsetForLeaderEpoch where the epoch of its last appended batch ends there, and
// truncates to the answer (applyEpochEnd). It returns the partitions of ps to fetch now:
// those checked and those that need no check; one whose check failed waits for the next
// round (with the source metadata refreshed).
func (f *fetcher) checkEpochs(ctx context.Context, cfg *mirrorConfig, conn *fetchConn, ps []*partition) []*partition {
	var asks []epochAsk
	for _, p := range ps {
		p.mu.Lock()
		if p.st.State == mirrorproto.StateMirroring && p.needsEpochCheck(f.key.broker) {
			if l, err := p.getLog(); err == nil {
				a := epochAsk{p: p, epoch: p.lastFetchedEpoch(l), leo: l.LogEndOffset(), srcEpoch: p.srcLeaderEpoch.Load()}
				if a.epoch < 0 { // no batch yet: nothing to truncate
					p.epochChecked, p.epochCheckBroker, p.epochCheckEpoch = true, f.key.broker, a.srcEpoch
				} else {
					asks = append(asks, a)
				}
			}
		}
		p.mu.Unlock()
	}
	if len(asks) == 0 {
		return ps
	}
	pending := make(map[*partition]bool, len(asks))
	for _, a := range asks {
		pending[a.p] = true
	}
	for round := 0; round < maxEpochCheckRounds && len(asks) > 0; round++ {
		resp, err := f.offsetForLeaderEpoch(ctx, cfg, conn, asks)
		if err != nil {
			if ctx.Err() == nil {
				f.r.fetchErrors.Add(1)
				f.r.m.log.Warn("mirror OffsetForLeaderEpoch failed", "mirror", f.r.name, "sourceBroker", f.key.broker, "err", err)
				f.r.requestMeta()
			}
			break
		}
		byTP := make(map[kafka.TopicPartition]*epochAsk, len(asks))
		for i := range asks {
			byTP[kafka.TopicPartition{Topic: asks[i].p.topic, Partition: asks[i].p.index}] = &asks[i]
		}
		var again []epochAsk
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				a := byTP[kafka.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]
				if a == nil {
					continue
				}
				if rp.ErrorCode != 0 {
					f.r.fetchErrors.Add(1)
					f.r.m.log.Warn("mirror OffsetForLeaderEpoch error", "mirror", f.r.name, "partition", a.p.String(),
						"sourceBroker", f.key.broker, "err", kerr.ErrorForCode(rp.ErrorCode))
					f.r.requestMeta()
					continue
				}
				next, done := a.p.applyEpochEnd(*a, f.key.broker, rp.LeaderEpoch, rp.EndOffset)
				switch {
				case done:
					delete(pending, a.p)
				case next.epoch >= 0:
					again = append(again, next)
				}
			}
		}
		asks = again
	}
	for _, p := range ps {
		if p.runnerNeeded() { // a truncation entered ULE_RECOVERY
			f.r.kick()
			break
		}
	}
	if len(pending) == 0 {
		return ps
	}
	out := make([]*partition, 0, len(ps)-len(pending))
	for _, p := range ps {
		if !pending[p] {
			out = append(out, p)
		}
	}
	return out
}

// offsetForLeaderEpoch sends one OffsetForLeaderEpoch request for asks over conn, as a
// consumer (replica ID −1, no current leader epoch: the answer is the leader's whatever
// its epoch).
func (f *fetcher) offsetForLeaderEpoch(ctx context.Context, cfg *mirrorConfig, conn *fetchConn, asks []epochAsk) (*kmsg.OffsetForLeaderEpochResponse, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = conn.ofleV
	req.ReplicaID = -1
	topicIdx := map[string]int{}
	for _, a := range asks {
		i, ok := topicIdx[a.p.topic]
		if !ok {
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = a.p.topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topicIdx[a.p.topic] = i
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition = a.p.index
		rp.LeaderEpoch = a.epoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	if _, err := conn.roundTrip(ctx, req, resp, nil, cfg.requestTimeout); err != nil {
		return nil, err
	}
	return resp, nil
}

// applyEpochEnd truncates the local log to the source's answer for a (Kafka's
// AbstractFetcherThread.getOffsetTruncationState, with the local log as the follower's):
//   - end offset UNDEFINED (−1): the source no longer has the epoch (its log starts
//     after it): no truncation, as Kafka keeps the fetch offset;
//   - leader epoch UNDEFINED (−1) with an end offset: min(end offset, LEO);
//   - an epoch the local log has: min(end offset, local end offset of that epoch, LEO);
//   - an epoch the local log does not have: truncate to the local end offset of the
//     largest smaller epoch and ask again with that one (next), or to min(end offset,
//     LEO) when there is none.
//
// done reports the check complete (recorded against broker and a.srcEpoch); neither done
// nor next (epoch −1) means a stale answer or a partition no longer mirroring: checked
// again next round. mu not held.
func (p *partition) applyEpochEnd(a epochAsk, broker, epoch int32, end int64) (next epochAsk, done bool) {
	next.epoch = -1
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st.State != mirrorproto.StateMirroring || p.retired() {
		return next, false
	}
	l, err := p.getLog()
	if err != nil || l.LogEndOffset() != a.leo {
		return next, false
	}
	target := a.leo
	switch {
	case end < 0:
	case epoch < 0:
		target = min(end, a.leo)
	default:
		localEpoch, localEnd := l.EndOffsetForEpoch(epoch)
		switch {
		case localEpoch < 0 || localEnd < 0:
			target = min(end, a.leo)
		case localEpoch != epoch:
			target = min(localEnd, a.leo)
			next = epochAsk{p: p, epoch: localEpoch, srcEpoch: a.srcEpoch}
		default:
			target = min(end, localEnd, a.leo)
		}
	}
	if target < a.leo {
		if err := p.truncateSourceDiverged(l, target, fmt.Sprintf("OffsetForLeaderEpoch: source epoch %d ends at offset %d (asked for epoch %d)", epoch, end, a.epoch)); err != nil {
			return epochAsk{epoch: -1}, false
		}
	}
	if next.epoch >= 0 {
		next.leo = l.LogEndOffset()
		return next, false
	}
	p.epochChecked, p.epochCheckBroker, p.epochCheckEpoch = true, broker, a.srcEpoch
	return next, true
}

// truncateSourceDiverged truncates the local log to target where the source's history
// parts from it (DivergingEpoch or OffsetForLeaderEpoch) and persists the report; a
// failed truncation fails the partition. mu held.
func (p *partition) truncateSourceDiverged(l *storage.Log, target int64, why string) error {
	if target < l.LogEndOffset() {
		p.uleRecovery()
	}
	err := p.truncateTo(l, target, why)
	if err != nil {
		p.fail("truncate to the source divergence point: "+err.Error(), false)
	}
	p.persist()
	return err
}
