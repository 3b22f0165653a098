package metadata

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// applyBatch applies recs, in order, to a copy-on-write successor of im and returns it with
// Offset set to offset. im is never modified. On the first invalid record it returns the
// error and no image: a batch applies entirely or not at all.
func applyBatch(im *Image, offset uint64, recs []Record) (*Image, error) {
	b := &builder{next: new(Image)}
	*b.next = *im
	b.next.Offset = offset
	for _, r := range recs {
		if err := b.apply(r); err != nil {
			return nil, err
		}
	}
	return b.next, nil
}

// builder tracks which maps of next are already private copies, so that each map of the
// previous image is cloned at most once per batch.
type builder struct {
	next                                                *Image
	topicsOwned, mirrorsOwned, nodesOwned, brokersOwned bool
	aclsOwned                                           bool
}

func (b *builder) ownACLs() {
	if !b.aclsOwned {
		b.next.ACLs = maps.Clone(b.next.ACLs)
		if b.next.ACLs == nil {
			b.next.ACLs = map[TopicID]*AccessControlEntryRecord{}
		}
		b.aclsOwned = true
	}
}

func (b *builder) ownBrokers() {
	if !b.brokersOwned {
		b.next.Brokers = maps.Clone(b.next.Brokers)
		b.brokersOwned = true
	}
}

// cloneOrNil copies a broker list; an empty one becomes nil (the image's form of "none").
func cloneOrNil(l []int32) []int32 {
	if len(l) == 0 {
		return nil
	}
	return slices.Clone(l)
}

// unassigned returns n registrations of partitions without replicas.
func unassigned(n int32) []*PartitionRegistration {
	out := make([]*PartitionRegistration, n)
	for i := range out {
		out[i] = unassignedPartition
	}
	return out
}

// checkList validates one broker list of a partition: non-negative, unique broker IDs,
// each a replica unless replicas is nil.
func checkList(where, name string, list, replicas []int32) error {
	for i, r := range list {
		if r < 0 || slices.Contains(list[:i], r) || (replicas != nil && !slices.Contains(replicas, r)) {
			return fmt.Errorf("%w: %s: %s %v (replicas %v)", ErrInvalidRecord, where, name, list, replicas)
		}
	}
	return nil
}

// checkPartition validates a partition registration (Kafka's PartitionRegistration
// invariants): replicas non-empty, non-negative and unique; the ISR a non-empty subset of
// the replicas (kmirror elects without KIP-966, so an ISR never empties); the replicas
// being removed and added subsets of the replicas, disjoint; the ELR a subset of the
// replicas outside the ISR, the last-known ELR a subset of the replicas; the leader
// NoLeader or in the ISR; the leader recovery state RECOVERED or RECOVERING; epochs not
// negative.
func checkPartition(where string, p *PartitionRegistration) error {
	if len(p.Replicas) == 0 {
		return fmt.Errorf("%w: %s: no replicas", ErrInvalidRecord, where)
	}
	if err := checkList(where, "replicas", p.Replicas, nil); err != nil {
		return err
	}
	if len(p.ISR) == 0 {
		return fmt.Errorf("%w: %s: empty ISR", ErrInvalidRecord, where)
	}
	if err := checkList(where, "ISR", p.ISR, p.Replicas); err != nil {
		return err
	}
	for _, l := range []struct {
		name string
		list []int32
	}{{"removing replicas", p.RemovingReplicas}, {"adding replicas", p.AddingReplicas}, {"ELR", p.ELR}, {"last-known ELR", p.LastKnownELR}} {
		if err := checkList(where, l.name, l.list, p.Replicas); err != nil {
			return err
		}
	}
	for _, r := range p.AddingReplicas {
		if slices.Contains(p.RemovingReplicas, r) {
			return fmt.Errorf("%w: %s: replica %d is both added and removed", ErrInvalidRecord, where, r)
		}
	}
	for _, r := range p.ELR {
		if slices.Contains(p.ISR, r) {
			return fmt.Errorf("%w: %s: replica %d is in both the ISR %v and the ELR %v", ErrInvalidRecord, where, r, p.ISR, p.ELR)
		}
	}
	if p.Leader != NoLeader && !slices.Contains(p.ISR, p.Leader) {
		return fmt.Errorf("%w: %s: leader %d is not in the ISR %v", ErrInvalidRecord, where, p.Leader, p.ISR)
	}
	if p.LeaderRecoveryState != LeaderRecovered && p.LeaderRecoveryState != LeaderRecovering {
		return fmt.Errorf("%w: %s: leader recovery state %d", ErrInvalidRecord, where, p.LeaderRecoveryState)
	}
	if p.LeaderEpoch < 0 || p.PartitionEpoch < 0 {
		return fmt.Errorf("%w: %s: negative leader or partition epoch", ErrInvalidRecord, where)
	}
	return nil
}

// checkPlacement refuses a new partition placed on a broker that is not registered, or
// led by one that may not lead (fenced or in controlled shutdown): the placement was
// computed from an image older than the brokers' state (ErrStalePlacement).
func (b *builder) checkPlacement(where string, replicas []int32, leader int32) error {
	for _, r := range replicas {
		if _, ok := b.next.Brokers[r]; !ok {
			return fmt.Errorf("%w: %s: replica on broker %d, which is not registered", ErrStalePlacement, where, r)
		}
	}
	if leader != NoLeader && !b.next.Brokers[leader].Usable() {
		return fmt.Errorf("%w: %s: leader %d is fenced or shutting down", ErrStalePlacement, where, leader)
	}
	return nil
}

// partitionAt returns the topic with id and the registration of partition p.
func (b *builder) partitionAt(id TopicID, p int32) (*Topic, *PartitionRegistration, error) {
	t, ok := b.next.TopicsByID[id]
	if !ok {
		return nil, nil, fmt.Errorf("%w: topic ID %s", ErrUnknownTopic, TopicIDString(id))
	}
	reg := t.Partition(p)
	if reg == nil {
		return nil, nil, fmt.Errorf("%w: topic %q has no partition %d", ErrInvalidRecord, t.Name, p)
	}
	return t, reg, nil
}

// putPartition stores reg as partition p of a copy of t.
func (b *builder) putPartition(t *Topic, p int32, reg *PartitionRegistration) {
	nt := *t
	nt.Registrations = slices.Clone(t.Registrations)
	nt.Registrations[p] = reg
	b.putTopic(&nt)
}

// broker returns the registration of id at epoch.
func (b *builder) broker(id int32, epoch int64) (*BrokerRegistration, error) {
	br, ok := b.next.Brokers[id]
	if !ok || br.Epoch != epoch {
		return nil, fmt.Errorf("%w: broker %d with broker epoch %d", ErrUnknownBroker, id, epoch)
	}
	return br, nil
}

func (b *builder) ownTopics() {
	if !b.topicsOwned {
		b.next.Topics = maps.Clone(b.next.Topics)
		b.next.TopicsByID = maps.Clone(b.next.TopicsByID)
		b.topicsOwned = true
	}
}

func (b *builder) ownMirrors() {
	if !b.mirrorsOwned {
		b.next.Mirrors = maps.Clone(b.next.Mirrors)
		b.mirrorsOwned = true
	}
}

// putTopic stores t (a fresh value) under its name and ID.
func (b *builder) putTopic(t *Topic) {
	b.ownTopics()
	b.next.Topics[t.Name] = t
	b.next.TopicsByID[t.ID] = t
}

// setConfig returns a copy of m with name set to value, or deleted when value is nil; nil
// when the result is empty.
func setConfig(m map[string]string, name string, value *string) map[string]string {
	m = maps.Clone(m)
	if value == nil {
		delete(m, name)
	} else {
		if m == nil {
			m = map[string]string{}
		}
		m[name] = *value
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func (b *builder) checkMirrorTopic(mt *MirrorTopic, topic string) error {
	if mt == nil {
		return nil
	}
	if !mt.Desired.valid() {
		return fmt.Errorf("%w: topic %q: desired mirror state %v", ErrInvalidRecord, topic, mt.Desired)
	}
	if _, ok := b.next.Mirrors[mt.MirrorName]; !ok {
		return fmt.Errorf("%w: %q (topic %q)", ErrUnknownMirror, mt.MirrorName, topic)
	}
	return nil
}

func (b *builder) apply(r Record) error {
	im := b.next
	switch r := r.(type) {
	case ClusterRecord:
		if r.ClusterID == "" {
			return fmt.Errorf("%w: empty cluster ID", ErrInvalidRecord)
		}
		if im.ClusterID != "" {
			return fmt.Errorf("%w: cluster ID already set to %s", ErrInvalidRecord, im.ClusterID)
		}
		im.ClusterID = r.ClusterID

	case TopicRecord:
		if r.Name == "" || r.ID == (TopicID{}) {
			return fmt.Errorf("%w: topic needs a name and a non-zero topic ID", ErrInvalidRecord)
		}
		if _, ok := im.Topics[r.Name]; ok {
			return fmt.Errorf("%w: topic %q", ErrTopicExists, r.Name)
		}
		if t, ok := im.TopicsByID[r.ID]; ok {
			return fmt.Errorf("%w: topic ID %s is used by topic %q", ErrTopicExists, TopicIDString(r.ID), t.Name)
		}
		if r.Partitions < 1 {
			return fmt.Errorf("%w: topic %q: %d partitions", ErrInvalidPartitions, r.Name, r.Partitions)
		}
		if err := b.checkMirrorTopic(r.Mirror, r.Name); err != nil {
			return err
		}
		t := &Topic{Name: r.Name, ID: r.ID, Partitions: r.Partitions, Registrations: unassigned(r.Partitions)}
		if len(r.Configs) > 0 {
			t.Configs = maps.Clone(r.Configs)
		}
		if r.Mirror != nil {
			mt := *r.Mirror
			t.Mirror = &mt
		}
		b.putTopic(t)

	case PartitionCountRecord:
		old, ok := im.Topics[r.Name]
		if !ok {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, r.Name)
		}
		if r.Partitions <= old.Partitions {
			return fmt.Errorf("%w: topic %q has %d partitions, cannot change to %d", ErrInvalidPartitions, r.Name, old.Partitions, r.Partitions)
		}
		t := *old
		t.Partitions = r.Partitions
		t.Registrations = append(slices.Clone(old.Registrations), unassigned(r.Partitions-old.Partitions)...)
		b.putTopic(&t)

	case RemoveTopicRecord:
		old, ok := im.TopicsByID[r.ID]
		if !ok {
			return fmt.Errorf("%w: topic ID %s", ErrUnknownTopic, TopicIDString(r.ID))
		}
		b.ownTopics()
		delete(im.Topics, old.Name)
		delete(im.TopicsByID, old.ID)

	case ConfigRecord:
		if r.Name == "" {
			return fmt.Errorf("%w: empty config name", ErrInvalidRecord)
		}
		switch r.ResourceType {
		case ResourceTopic:
			old, ok := im.Topics[r.ResourceName]
			if !ok {
				return fmt.Errorf("%w: %q", ErrUnknownTopic, r.ResourceName)
			}
			t := *old
			t.Configs = setConfig(old.Configs, r.Name, r.Value)
			b.putTopic(&t)
		case ResourceBroker:
			if r.ResourceName == "" {
				im.BrokerConfigs = setConfig(im.BrokerConfigs, r.Name, r.Value)
				if im.BrokerConfigs == nil {
					im.BrokerConfigs = map[string]string{}
				}
				break
			}
			if _, err := strconv.ParseInt(r.ResourceName, 10, 32); err != nil {
				return fmt.Errorf("%w: broker config resource %q is not a broker ID", ErrInvalidRecord, r.ResourceName)
			}
			if !b.nodesOwned {
				im.NodeConfigs = maps.Clone(im.NodeConfigs)
				b.nodesOwned = true
			}
			if m := setConfig(im.NodeConfigs[r.ResourceName], r.Name, r.Value); m != nil {
				im.NodeConfigs[r.ResourceName] = m
			} else {
				delete(im.NodeConfigs, r.ResourceName)
			}
		case ResourceClusterMirror:
			old, ok := im.Mirrors[r.ResourceName]
			if !ok {
				return fmt.Errorf("%w: %q", ErrUnknownMirror, r.ResourceName)
			}
			m := *old
			m.Configs = setConfig(old.Configs, r.Name, r.Value)
			b.ownMirrors()
			im.Mirrors[m.Name] = &m
		default:
			return fmt.Errorf("%w: config resource type %d", ErrInvalidRecord, r.ResourceType)
		}

	case MirrorRecord:
		if r.Name == "" {
			return fmt.Errorf("%w: empty mirror name", ErrInvalidRecord)
		}
		if _, ok := im.Mirrors[r.Name]; ok {
			return fmt.Errorf("%w: %q", ErrMirrorExists, r.Name)
		}
		m := &Mirror{Name: r.Name, SourceClusterID: r.SourceClusterID, CreatedMs: r.CreatedMs}
		if len(r.Configs) > 0 {
			m.Configs = maps.Clone(r.Configs)
		}
		b.ownMirrors()
		im.Mirrors[r.Name] = m

	case RemoveMirrorRecord:
		if _, ok := im.Mirrors[r.Name]; !ok {
			return fmt.Errorf("%w: %q", ErrUnknownMirror, r.Name)
		}
		b.ownMirrors()
		delete(im.Mirrors, r.Name)
		for _, old := range im.MirrorTopics(r.Name) {
			t := *old
			t.Mirror = nil
			b.putTopic(&t)
		}

	case MirrorTopicRecord:
		old, ok := im.Topics[r.Topic]
		if !ok {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, r.Topic)
		}
		if err := b.checkMirrorTopic(r.Mirror, r.Topic); err != nil {
			return err
		}
		t := *old
		t.Mirror = nil
		if r.Mirror != nil {
			mt := *r.Mirror
			t.Mirror = &mt
		}
		b.putTopic(&t)

	case PartitionRecord:
		t, cur, err := b.partitionAt(r.TopicID, r.Partition)
		if err != nil {
			return err
		}
		where := fmt.Sprintf("%s-%d", t.Name, r.Partition)
		if cur.Assigned() {
			return fmt.Errorf("%w: %s is already assigned", ErrInvalidRecord, where)
		}
		reg := &PartitionRegistration{
			Replicas: slices.Clone(r.Replicas), ISR: slices.Clone(r.ISR),
			RemovingReplicas: cloneOrNil(r.RemovingReplicas), AddingReplicas: cloneOrNil(r.AddingReplicas),
			Leader: r.Leader, LeaderRecoveryState: r.LeaderRecoveryState,
			LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
			ELR: cloneOrNil(r.ELR), LastKnownELR: cloneOrNil(r.LastKnownELR),
		}
		if err := checkPartition(where, reg); err != nil {
			return err
		}
		if err := b.checkPlacement(where, r.Replicas, r.Leader); err != nil {
			return err
		}
		b.putPartition(t, r.Partition, reg)

	case PartitionChangeRecord:
		t, cur, err := b.partitionAt(r.TopicID, r.Partition)
		if err != nil {
			return err
		}
		where := fmt.Sprintf("%s-%d", t.Name, r.Partition)
		if !cur.Assigned() {
			return fmt.Errorf("%w: %s is not assigned", ErrInvalidRecord, where)
		}
		next := *cur
		if r.Replicas != nil {
			for _, id := range r.Replicas {
				if _, ok := b.next.Brokers[id]; !ok && !cur.HasReplica(id) {
					return fmt.Errorf("%w: %s: new replica on broker %d, which is not registered", ErrStalePlacement, where, id)
				}
			}
			next.Replicas = slices.Clone(r.Replicas)
		}
		setList := func(dst *[]int32, src []int32) {
			if src != nil {
				*dst = cloneOrNil(src)
			}
		}
		setList(&next.ISR, r.ISR)
		setList(&next.RemovingReplicas, r.RemovingReplicas)
		setList(&next.AddingReplicas, r.AddingReplicas)
		setList(&next.ELR, r.ELR)
		setList(&next.LastKnownELR, r.LastKnownELR)
		if r.Leader != nil {
			next.Leader = *r.Leader
		}
		if r.LeaderRecoveryState != nil {
			next.LeaderRecoveryState = *r.LeaderRecoveryState
		}
		if r.LeaderEpoch < cur.LeaderEpoch || (next.Leader != cur.Leader && r.LeaderEpoch == cur.LeaderEpoch) {
			return fmt.Errorf("%w: %s: leader epoch %d after %d (leader %d → %d)", ErrInvalidRecord, where, r.LeaderEpoch, cur.LeaderEpoch, cur.Leader, next.Leader)
		}
		next.LeaderEpoch = r.LeaderEpoch
		next.PartitionEpoch = cur.PartitionEpoch + 1
		if err := checkPartition(where, &next); err != nil {
			return err
		}
		b.putPartition(t, r.Partition, &next)

	case RegisterBrokerRecord:
		if r.BrokerID < 0 || len(r.Endpoints) == 0 {
			return fmt.Errorf("%w: broker registration needs a broker ID >= 0 and an endpoint", ErrInvalidRecord)
		}
		for _, e := range r.Endpoints {
			if e.Name == "" || e.Port < 1 || e.Port > 65535 {
				return fmt.Errorf("%w: broker %d: endpoint %+v", ErrInvalidRecord, r.BrokerID, e)
			}
		}
		b.ownBrokers()
		im.Brokers[r.BrokerID] = &BrokerRegistration{
			ID: r.BrokerID, Epoch: int64(im.Offset), IncarnationID: r.IncarnationID,
			Endpoints: slices.Clone(r.Endpoints), Rack: r.Rack, Fenced: r.Fenced,
		}

	case BrokerRegistrationChangeRecord:
		old, err := b.broker(r.BrokerID, r.BrokerEpoch)
		if err != nil {
			return err
		}
		br := *old
		if r.Fenced != nil {
			br.Fenced = *r.Fenced
		}
		if r.InControlledShutdown != nil {
			br.InControlledShutdown = *r.InControlledShutdown
		}
		b.ownBrokers()
		im.Brokers[r.BrokerID] = &br

	case UnregisterBrokerRecord:
		if _, err := b.broker(r.BrokerID, r.BrokerEpoch); err != nil {
			return err
		}
		b.ownBrokers()
		delete(im.Brokers, r.BrokerID)

	case ProducerIDsRecord:
		if r.NextProducerID <= im.NextProducerID {
			return fmt.Errorf("%w: next producer ID %d is not above %d", ErrInvalidRecord, r.NextProducerID, im.NextProducerID)
		}
		im.NextProducerID = r.NextProducerID

	case AccessControlEntryRecord:
		if r.ID == (TopicID{}) || r.ResourceName == "" || r.Principal == "" || r.Host == "" {
			return fmt.Errorf("%w: ACL binding needs an ID, a resource name, a principal and a host", ErrInvalidRecord)
		}
		if _, ok := im.ACLs[r.ID]; ok {
			return fmt.Errorf("%w: ACL binding ID %s is in use", ErrInvalidRecord, TopicIDString(r.ID))
		}
		b.ownACLs()
		rec := r
		im.ACLs[r.ID] = &rec
	case RemoveAccessControlEntryRecord:
		if _, ok := im.ACLs[r.ID]; !ok {
			return fmt.Errorf("%w: %s", ErrUnknownACL, TopicIDString(r.ID))
		}
		b.ownACLs()
		delete(im.ACLs, r.ID)
	case UserScramCredentialRecord:
		if r.Name == "" || (r.Mechanism != 1 && r.Mechanism != 2) {
			return fmt.Errorf("%w: SCRAM credential of user %q, mechanism %d", ErrInvalidRecord, r.Name, r.Mechanism)
		}
		creds := maps.Clone(im.ScramCredentials[r.Name])
		if creds == nil {
			creds = map[int8]*ScramCredential{}
		}
		creds[r.Mechanism] = &ScramCredential{Salt: r.Salt, StoredKey: r.StoredKey, ServerKey: r.ServerKey, Iterations: r.Iterations}
		im.ScramCredentials = maps.Clone(im.ScramCredentials)
		if im.ScramCredentials == nil {
			im.ScramCredentials = map[string]map[int8]*ScramCredential{}
		}
		im.ScramCredentials[r.Name] = creds

	case RemoveUserScramCredentialRecord:
		if im.ScramCredentials[r.Name][r.Mechanism] == nil {
			return fmt.Errorf("%w: user %q, mechanism %d", ErrUnknownScramCredential, r.Name, r.Mechanism)
		}
		creds := maps.Clone(im.ScramCredentials[r.Name])
		delete(creds, r.Mechanism)
		im.ScramCredentials = maps.Clone(im.ScramCredentials)
		if len(creds) == 0 {
			delete(im.ScramCredentials, r.Name)
		} else {
			im.ScramCredentials[r.Name] = creds
		}

	default:
		return fmt.Errorf("%w: unknown record type %T", ErrInvalidRecord, r)
	}
	return nil
}
