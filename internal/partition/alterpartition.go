package partition

// ISR changes reach the controller as AlterPartition requests (Kafka's
// DefaultAlterPartitionManager): each leader proposes one change at a time per
// partition; the manager sends every queued proposal in one request, one request at a
// time, and hands each partition its answer. See docs/replication.md.

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionFunc sends one AlterPartition request to the active controller and
// returns its answer (an error: no answer, the whole request is sent again).
type AlterPartitionFunc func(ctx context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error)

// alterPartitionRetryBackoff is the pause before a request that got no answer (or a
// top-level error such as NOT_CONTROLLER) is sent again.
const alterPartitionRetryBackoff = 100 * time.Millisecond

// isrProposal is one partition's pending AlterPartition item.
type isrProposal struct {
	p              *Partition
	leaderEpoch    int32
	partitionEpoch int32
	isr            []kmsg.AlterPartitionRequestTopicPartitionNewEpochISR
	recovered      bool // LeaderRecoveryState RECOVERED (a recovering leader recovered)
}

// proposeIsr makes isr the partition's proposed ISR and queues it for the controller
// (Kafka's prepareIsrExpand / prepareIsrShrink + submitAlterPartition). lmu held.
func (p *Partition) proposeIsr(isr []int32, expand bool) {
	ls := p.ls
	ls.isr.proposed, ls.isr.expand = isr, expand
	if p.rm == nil {
		return
	}
	prop := &isrProposal{p: p, leaderEpoch: p.LeaderEpoch(), partitionEpoch: ls.partitionEpoch, recovered: ls.isr.recovering}
	for _, id := range isr {
		epoch := int64(-1)
		if id == p.nodeID {
			epoch = p.rm.brokerEpoch()
		} else if rs := ls.replicas[id]; rs != nil {
			epoch = rs.brokerEpoch
		}
		prop.isr = append(prop.isr, kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: id, BrokerEpoch: epoch})
	}
	p.rm.log.Info("proposing an ISR change", "partition", p.String(), "isr", ls.isr.isr, "proposed", isr,
		"leaderEpoch", prop.leaderEpoch, "partitionEpoch", prop.partitionEpoch)
	p.rm.alter.enqueue(prop)
}

// onAlterPartition applies the controller's answer to a proposal (Kafka's
// handleAlterPartitionUpdate / handleAlterPartitionError): the new committed ISR and
// partition epoch on success; on OPERATION_NOT_ATTEMPTED or INELIGIBLE_REPLICA the
// committed ISR again (a later fetch may propose anew); on the errors that mean this
// leader's view is stale (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_*,
// INVALID_REQUEST, NEW_LEADER_ELECTED) the proposal stays pending until the metadata
// brings the partition's registration. It reports whether the proposal must be sent again
// (any other error).
func (p *Partition) onAlterPartition(prop *isrProposal, r *kmsg.AlterPartitionResponseTopicPartition) (retry bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	p.lmu.Lock()
	defer p.lmu.Unlock()
	ls := p.ls
	if ls == nil || !p.leading.Load() || p.LeaderEpoch() != prop.leaderEpoch || ls.partitionEpoch != prop.partitionEpoch {
		return false // the partition moved on (new registration); the answer is stale
	}
	err := kerr.ErrorForCode(r.ErrorCode)
	switch err {
	case nil:
		if r.LeaderEpoch != prop.leaderEpoch || r.PartitionEpoch < ls.partitionEpoch {
			return false
		}
		ls.isr = isrState{isr: slices.Clone(r.ISR), recovering: r.LeaderRecoveryState == 1}
		ls.partitionEpoch = r.PartitionEpoch
		p.rm.log.Info("ISR changed", "partition", p.String(), "isr", r.ISR, "partitionEpoch", r.PartitionEpoch)
		p.maybeIncrementHighWatermark(time.Now().UnixMilli())
		p.log.Wake() // acks=all waits re-check min ISR
		p.notifyListener()
		return false
	case kerr.OperationNotAttempted, kerr.IneligibleReplica:
		p.rm.log.Info("the controller refused an ISR change; back to the committed ISR", "partition", p.String(), "err", err)
		ls.isr.proposed, ls.isr.expand = nil, false
		return false
	case kerr.FencedLeaderEpoch, kerr.InvalidUpdateVersion, kerr.UnknownTopicOrPartition, kerr.UnknownTopicID,
		kerr.InvalidRequest, kerr.NewLeaderElected:
		p.rm.log.Info("an ISR change failed; waiting for the partition's latest metadata", "partition", p.String(), "err", err)
		return false
	default:
		p.rm.log.Warn("an ISR change failed; retrying", "partition", p.String(), "err", err)
		return true
	}
}

// alterPartitionManager queues proposals and sends them, one request at a time.
type alterPartitionManager struct {
	rm   *ReplicaManager
	send AlterPartitionFunc
	wake chan struct{}

	mu    sync.Mutex
	queue map[*Partition]*isrProposal // at most one per led partition
}

func newAlterPartitionManager(rm *ReplicaManager, send AlterPartitionFunc) *alterPartitionManager {
	return &alterPartitionManager{rm: rm, send: send, wake: make(chan struct{}, 1), queue: map[*Partition]*isrProposal{}}
}

// enqueue adds a proposal; the newest proposal of a partition replaces an older queued
// one.
func (m *alterPartitionManager) enqueue(prop *isrProposal) {
	m.mu.Lock()
	m.queue[prop.p] = prop
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// run sends the queued proposals until ctx ends.
func (m *alterPartitionManager) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		}
		for {
			m.mu.Lock()
			batch := m.queue
			m.queue = map[*Partition]*isrProposal{}
			m.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			if m.send == nil {
				continue // no controller to tell (tests of a lone partition)
			}
			if retry := m.sendBatch(ctx, batch); len(retry) > 0 {
				m.mu.Lock()
				for p, prop := range retry {
					if m.queue[p] == nil {
						m.queue[p] = prop
					}
				}
				m.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-time.After(alterPartitionRetryBackoff):
				}
			}
		}
	}
}

// sendBatch sends one request with batch and returns the proposals to send again.
func (m *alterPartitionManager) sendBatch(ctx context.Context, batch map[*Partition]*isrProposal) map[*Partition]*isrProposal {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.BrokerID, req.BrokerEpoch = m.rm.opts.NodeID, m.rm.brokerEpoch()
	byTopic := map[[16]byte]int{}
	for _, prop := range batch {
		id := [16]byte(prop.p.topicID)
		i, ok := byTopic[id]
		if !ok {
			t := kmsg.NewAlterPartitionRequestTopic()
			t.TopicID, t.Topic = id, prop.p.topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[id] = i
		}
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = prop.p.index, prop.leaderEpoch, prop.partitionEpoch
		rp.NewEpochISR = prop.isr
		for _, e := range prop.isr {
			rp.NewISR = append(rp.NewISR, e.BrokerID)
		}
		if prop.recovered {
			rp.LeaderRecoveryState = 0 // RECOVERED
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp, err := m.send(ctx, req)
	if err == nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		m.rm.log.Warn("AlterPartition failed; retrying", "partitions", len(batch), "err", err)
		return batch
	}
	type key struct {
		id [16]byte
		p  int32
	}
	answers := map[key]*kmsg.AlterPartitionResponseTopicPartition{}
	names := map[string][16]byte{}
	for _, prop := range batch {
		names[prop.p.topic] = prop.p.topicID
	}
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		id := t.TopidID // sic: kmsg's spelling
		if id == ([16]byte{}) {
			id = names[t.Topic] // versions before 2 name topics
		}
		for pi := range t.Partitions {
			answers[key{id, t.Partitions[pi].Partition}] = &t.Partitions[pi]
		}
	}
	retry := map[*Partition]*isrProposal{}
	for p, prop := range batch {
		r := answers[key{p.topicID, p.index}]
		if r == nil {
			m.rm.log.Warn("AlterPartition answered without a partition; retrying", "partition", p.String())
			retry[p] = prop
			continue
		}
		if p.onAlterPartition(prop, r) {
			retry[p] = prop
		}
	}
	return retry
}
