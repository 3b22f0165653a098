package controller

// Leader elections and ISR changes (Kafka's PartitionChangeBuilder, as the 4.x
// controller runs it at the latest metadata version without KIP-966's eligible leader
// replicas): every decision about a partition's leader, ISR and leader recovery state is
// a partitionChange built here, then one PartitionChangeRecord or none.

import (
	"slices"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/internal/metadata"
)

// canLead reports whether broker id may become a leader in im: registered, unfenced and
// not in controlled shutdown (Kafka's ClusterControlManager.isActive, the LeaderAcceptor
// of PartitionChangeBuilder).
func canLead(im *metadata.Image, id int32) bool {
	b, ok := im.Brokers[id]
	return ok && b.Usable()
}

// election is the kind of leader election of a partitionChange (Kafka's
// PartitionChangeBuilder.Election).
type election int8

const (
	// electOnline keeps a valid leader, else elects the first replica in the ISR that may
	// lead (Kafka's ONLINE).
	electOnline election = iota
	// electPreferred elects the preferred replica when it is in the ISR and may lead,
	// else as electOnline (Kafka's PREFERRED).
	electPreferred
	// electUnclean is electOnline and, when no ISR member may lead, the first replica
	// that may, with the ISR set to it alone and the leader recovery state RECOVERING
	// (Kafka's UNCLEAN).
	electUnclean
)

// partitionChange is Kafka's PartitionChangeBuilder for one partition: the target ISR and
// leader recovery state, the election kind and which brokers may lead.
type partitionChange struct {
	topic     metadata.TopicID
	partition int32
	reg       *metadata.PartitionRegistration
	mayLead   func(int32) bool
	election  election
	isr       []int32 // the target ISR
	recovery  int8    // the target leader recovery state
}

// newChange starts a change of partition p of topic id, whose registration in im is reg:
// nothing changes yet, brokers that may lead are those canLead in im.
func newChange(im *metadata.Image, id metadata.TopicID, p int32, reg *metadata.PartitionRegistration) *partitionChange {
	return &partitionChange{
		topic: id, partition: p, reg: reg,
		mayLead:  func(r int32) bool { return canLead(im, r) },
		isr:      reg.ISR,
		recovery: reg.LeaderRecoveryState,
	}
}

// validLeader reports whether r may lead after the change: in the target ISR and allowed
// to lead (Kafka's isValidNewLeader without the ELR).
func (c *partitionChange) validLeader(r int32) bool {
	return slices.Contains(c.isr, r) && c.mayLead(r)
}

// elect returns the leader the election chooses and whether it is unclean (Kafka's
// electPreferredLeader and electAnyLeader).
func (c *partitionChange) elect() (int32, bool) {
	replicas := c.reg.Replicas
	if c.election == electPreferred {
		if len(replicas) > 0 && c.validLeader(replicas[0]) {
			return replicas[0], false
		}
		if c.validLeader(c.reg.Leader) {
			return c.reg.Leader, false
		}
		for _, r := range replicas[min(1, len(replicas)):] {
			if c.validLeader(r) {
				return r, false
			}
		}
		return metadata.NoLeader, false
	}
	if c.validLeader(c.reg.Leader) {
		return c.reg.Leader, false
	}
	for _, r := range replicas {
		if c.validLeader(r) {
			return r, false
		}
	}
	if c.election == electUnclean {
		for _, r := range replicas {
			if c.mayLead(r) {
				return r, true
			}
		}
	}
	return metadata.NoLeader, false
}

// build returns the PartitionChangeRecord of the change, nil when nothing changes
// (Kafka's PartitionChangeBuilder.build): the election first — a new leader (or none)
// raises the leader epoch by one, an unclean one makes the ISR the new leader alone and
// the recovery state RECOVERING — then the target ISR unless the election set it (an
// empty target keeps the ISR, so that a partition whose last in-sync replica left keeps
// it there with no leader), then the target recovery state. The leader epoch does not
// change with the ISR alone (Kafka 3.6+, KAFKA-15021). As with KIP-966 disabled, an ELR
// left in the registration is cleared; the last-known ELR is left alone.
func (c *partitionChange) build() *metadata.PartitionChangeRecord {
	reg := c.reg
	rec := &metadata.PartitionChangeRecord{TopicID: c.topic, Partition: c.partition, LeaderEpoch: reg.LeaderEpoch}
	changed := false
	if leader, unclean := c.elect(); leader != reg.Leader {
		rec.Leader = &leader
		rec.LeaderEpoch++
		changed = true
		if unclean {
			rec.ISR = []int32{leader}
			if reg.LeaderRecoveryState != metadata.LeaderRecovering {
				st := metadata.LeaderRecovering
				rec.LeaderRecoveryState = &st
			}
		}
	}
	if len(reg.ELR) > 0 {
		rec.ELR = []int32{}
		changed = true
	}
	if rec.ISR == nil && len(c.isr) > 0 && !slices.Equal(c.isr, reg.ISR) {
		rec.ISR = slices.Clone(c.isr)
	}
	if c.recovery != reg.LeaderRecoveryState {
		st := c.recovery
		rec.LeaderRecoveryState = &st
	}
	if !changed && rec.ISR == nil && rec.LeaderRecoveryState == nil {
		return nil
	}
	return rec
}

// merge returns reg after rec (Kafka's PartitionRegistration.merge), for answers that
// report the state a change leads to.
func merge(reg *metadata.PartitionRegistration, rec *metadata.PartitionChangeRecord) *metadata.PartitionRegistration {
	next := *reg
	if rec.Leader != nil {
		next.Leader = *rec.Leader
	}
	if rec.ISR != nil {
		next.ISR = rec.ISR
	}
	if rec.LeaderRecoveryState != nil {
		next.LeaderRecoveryState = *rec.LeaderRecoveryState
	}
	if rec.ELR != nil {
		next.ELR = rec.ELR
	}
	next.LeaderEpoch = rec.LeaderEpoch
	next.PartitionEpoch++
	return &next
}

// without returns isr minus broker id (Kafka's Replicas.copyWithout); it may be empty.
func without(isr []int32, id int32) []int32 {
	return slices.DeleteFunc(slices.Clone(isr), func(r int32) bool { return r == id })
}

// uncleanRule reports whether a topic allows unclean leader election.
type uncleanRule func(*metadata.Topic) bool

// onlineOrUnclean is the election of the controller's own decisions on t's partitions
// (Kafka's generateLeaderAndIsrUpdates): UNCLEAN when the topic allows it, else ONLINE.
func onlineOrUnclean(t *metadata.Topic, unclean uncleanRule) election {
	if unclean != nil && unclean(t) {
		return electUnclean
	}
	return electOnline
}

// leaving returns the changes for a broker that was fenced or entered controlled
// shutdown (already so in im): it leaves every ISR, unless it is the last member, and
// the partitions it led get a new leader or none (Kafka's
// ReplicationControlManager.handleBrokerFenced and handleBrokerInControlledShutdown).
func leaving(im *metadata.Image, id int32, unclean uncleanRule) []metadata.Record {
	var out []metadata.Record
	eachPartition(im, func(t *metadata.Topic, p int32, reg *metadata.PartitionRegistration) {
		if !slices.Contains(reg.ISR, id) && reg.Leader != id {
			return
		}
		c := newChange(im, t.ID, p, reg)
		c.isr = without(reg.ISR, id)
		c.election = onlineOrUnclean(t, unclean)
		if rec := c.build(); rec != nil {
			out = append(out, *rec)
		}
	})
	return out
}

// electOffline returns the changes that give a leader to every partition without one
// that has a replica able to lead in im (a broker unfenced, a controller that became
// active, unclean election enabled for a topic): Kafka's
// ReplicationControlManager.handleBrokerUnfenced and maybeElectUncleanLeaders.
func electOffline(im *metadata.Image, unclean uncleanRule) []metadata.Record {
	var out []metadata.Record
	eachPartition(im, func(t *metadata.Topic, p int32, reg *metadata.PartitionRegistration) {
		if reg.Leader != metadata.NoLeader {
			return
		}
		c := newChange(im, t.ID, p, reg)
		c.election = onlineOrUnclean(t, unclean)
		if rec := c.build(); rec != nil {
			out = append(out, *rec)
		}
	})
	return out
}

// maxElectionsPerImbalance bounds the preferred-leader elections of one auto-rebalance
// batch (Kafka's ReplicationControlManager.MAX_ELECTIONS_PER_IMBALANCE); a full batch
// is followed by the next at once.
const maxElectionsPerImbalance = 1000

// imbalanced reports whether a partition of im is not led by its preferred replica
// (Kafka's arePartitionLeadersImbalanced).
func imbalanced(im *metadata.Image) bool {
	found := false
	eachPartition(im, func(_ *metadata.Topic, _ int32, reg *metadata.PartitionRegistration) {
		found = found || !reg.HasPreferredLeader()
	})
	return found
}

// balanceLeaders returns at most limit preferred-leader elections for the partitions of
// im not led by their preferred replica (Kafka's maybeBalancePartitionLeaders): the
// preferred replica takes over when it is in the ISR and may lead.
func balanceLeaders(im *metadata.Image, limit int) []metadata.Record {
	var out []metadata.Record
	eachPartition(im, func(t *metadata.Topic, p int32, reg *metadata.PartitionRegistration) {
		if len(out) >= limit || reg.HasPreferredLeader() {
			return
		}
		c := newChange(im, t.ID, p, reg)
		c.election = electPreferred
		if rec := c.build(); rec != nil {
			out = append(out, *rec)
		}
	})
	return out
}

// eachPartition calls fn for every assigned partition of im, topics in name order.
func eachPartition(im *metadata.Image, fn func(t *metadata.Topic, p int32, reg *metadata.PartitionRegistration)) {
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		for p, reg := range t.Registrations {
			if reg.Assigned() {
				fn(t, int32(p), reg)
			}
		}
	}
}

// uncleanElectionKey is the topic config (and its broker default) that allows unclean
// leader election.
const uncleanElectionKey = "unclean.leader.election.enable"

// uncleanEnabled resolves unclean.leader.election.enable for topic t as Kafka's
// ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic does: the topic's
// config, else this controller's dynamic broker config, else the cluster-wide dynamic
// default, else the static config (Options.UncleanLeaderElection); a value is true when
// it is "true" in any case (Java's Boolean.parseBoolean).
func (c *Controller) uncleanEnabled(im *metadata.Image, t *metadata.Topic) bool {
	for _, m := range []map[string]string{t.Configs, im.NodeConfigs[strconv.Itoa(int(c.opts.NodeID))], im.BrokerConfigs} {
		if v, ok := m[uncleanElectionKey]; ok {
			return strings.EqualFold(strings.TrimSpace(v), "true")
		}
	}
	return c.opts.UncleanLeaderElection
}
