package metadata

import (
	"fmt"
	"slices"
	"strings"
)

// TopicID is a Kafka topic ID: 16 bytes, the two big-endian longs of Apache Kafka's
// org.apache.kafka.common.Uuid. Its text form is TopicIDString.
type TopicID = [16]byte

// Image is an immutable snapshot of cluster metadata, the counterpart of Apache Kafka's
// org.apache.kafka.image.MetadataImage. Never mutate an Image (or anything it points to)
// that you got from Controller.Image or Controller.Apply: later images share its Topic,
// Mirror and map values (copy-on-write).
type Image struct {
	// Offset is the raft log index of the last applied record batch (0 before the first);
	// the mirror RPCs use it as StateValidationOffset (spec section 10).
	Offset uint64
	// ClusterID is the 22-character base64url cluster ID, set once by a ClusterRecord.
	ClusterID string
	// Topics holds every topic by name.
	Topics map[string]*Topic
	// TopicsByID holds the same topics by topic ID.
	TopicsByID map[TopicID]*Topic
	// Mirrors holds every cluster mirror by mirror name.
	Mirrors map[string]*Mirror
	// BrokerConfigs holds the dynamic cluster-wide default broker configs (Kafka's BROKER
	// config resource with the empty name), by Kafka config name.
	BrokerConfigs map[string]string
	// NodeConfigs holds per-broker dynamic configs (BROKER resource named by a broker ID,
	// e.g. "1"): broker ID → config name → value. They override BrokerConfigs.
	NodeConfigs map[string]map[string]string
	// Brokers holds every registered broker by broker ID (Kafka's ClusterImage).
	Brokers map[int32]*BrokerRegistration
	// NextProducerID is the first producer ID not yet handed out in a block
	// (ProducerIDsRecord); 0 before the first block.
	NextProducerID int64
	// ACLs holds every ACL binding by its ID (AccessControlEntryRecord). A new map
	// whenever a binding is added or removed, so a reader may compare maps to notice a
	// change.
	ACLs map[TopicID]*AccessControlEntryRecord
	// ScramCredentials holds the SCRAM credentials: user name → mechanism code
	// (UserScramCredentialRecord.Mechanism) → credential.
	ScramCredentials map[string]map[int8]*ScramCredential
}

// ScramCredential is a stored SCRAM credential (Kafka's ScramCredentialData). Immutable.
type ScramCredential struct {
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
	Iterations int32  `json:"iterations"`
}

// NoLeader is the leader of a partition that has none (Kafka's LeaderConstants.NO_LEADER).
const NoLeader int32 = -1

// Leader recovery states (Kafka's LeaderRecoveryState): RECOVERING after an unclean
// election until the new leader has recovered its log.
const (
	LeaderRecovered  int8 = 0
	LeaderRecovering int8 = 1
)

// PartitionRegistration is the state of one partition in an Image (Kafka's
// org.apache.kafka.metadata.PartitionRegistration): replicas in preferred order, the
// in-sync replicas, the replicas being removed and added by a reassignment, the leader
// (NoLeader when offline) and its recovery state (RECOVERING after an unclean election,
// until the leader's AlterPartition says it recovered), the leader epoch (bumped by
// every leader change and by leader-epoch bumps, never by an ISR change alone, as in
// Kafka 3.6+), the partition epoch (bumped by every change) and KIP-966's eligible
// leader replicas (ELR, LastKnownELR; carried and shown, never populated by kmirror's
// controller, which elects as before KIP-966). A partition with no replicas is
// unassigned: a topic written by a release before clusters, until the controller
// assigns it. Immutable.
type PartitionRegistration struct {
	Replicas            []int32 `json:"replicas"`
	ISR                 []int32 `json:"isr"`
	RemovingReplicas    []int32 `json:"removingReplicas,omitempty"`
	AddingReplicas      []int32 `json:"addingReplicas,omitempty"`
	Leader              int32   `json:"leader"`
	LeaderRecoveryState int8    `json:"leaderRecoveryState,omitempty"`
	LeaderEpoch         int32   `json:"leaderEpoch"`
	PartitionEpoch      int32   `json:"partitionEpoch"`
	ELR                 []int32 `json:"elr,omitempty"`
	LastKnownELR        []int32 `json:"lastKnownElr,omitempty"`
}

// Assigned reports whether the partition has replicas.
func (p *PartitionRegistration) Assigned() bool { return len(p.Replicas) > 0 }

// HasReplica reports whether broker id holds a replica of the partition.
func (p *PartitionRegistration) HasReplica(id int32) bool { return slices.Contains(p.Replicas, id) }

// PreferredReplica is the first replica, NoLeader for an unassigned partition (Kafka's
// PartitionRegistration.preferredReplica).
func (p *PartitionRegistration) PreferredReplica() int32 {
	if len(p.Replicas) == 0 {
		return NoLeader
	}
	return p.Replicas[0]
}

// HasPreferredLeader reports whether the preferred replica leads (Kafka's
// hasPreferredLeader): partitions without it are imbalanced, for ElectLeaders PREFERRED
// and auto.leader.rebalance.enable.
func (p *PartitionRegistration) HasPreferredLeader() bool { return p.Leader == p.PreferredReplica() }

// unassignedPartition is the registration of a partition without replicas.
var unassignedPartition = &PartitionRegistration{Leader: NoLeader}

// Endpoint is one listener a broker advertises (Kafka's BrokerEndpoint): listener name,
// host, port and security protocol name (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).
type Endpoint struct {
	Name             string `json:"name"`
	Host             string `json:"host"`
	Port             int32  `json:"port"`
	SecurityProtocol string `json:"securityProtocol"`
}

// BrokerRegistration is one registered broker (Kafka's BrokerRegistration): its broker
// epoch (the metadata offset of its registration), the incarnation ID that the broker
// process chose at start, its advertised endpoints, rack, and whether it is fenced (not
// given leaderships: not caught up, or its session expired) or in controlled shutdown.
// Immutable.
type BrokerRegistration struct {
	ID                   int32      `json:"id"`
	Epoch                int64      `json:"epoch"`
	IncarnationID        TopicID    `json:"incarnationId"`
	Endpoints            []Endpoint `json:"endpoints"`
	Rack                 string     `json:"rack,omitempty"`
	Fenced               bool       `json:"fenced"`
	InControlledShutdown bool       `json:"inControlledShutdown,omitempty"`
}

// Endpoint returns the endpoint of listener name.
func (b *BrokerRegistration) Endpoint(name string) (Endpoint, bool) {
	for _, e := range b.Endpoints {
		if e.Name == name {
			return e, true
		}
	}
	return Endpoint{}, false
}

// Usable reports whether the broker may lead partitions: registered, unfenced and not in
// controlled shutdown (Kafka's BrokerHeartbeatManager "active" brokers).
func (b *BrokerRegistration) Usable() bool { return !b.Fenced && !b.InControlledShutdown }

// Topic is one topic in an Image (Apache Kafka's org.apache.kafka.image.TopicImage plus its
// dynamic configs and, for a mirror topic, its desired mirror state). Immutable.
type Topic struct {
	Name       string  `json:"name"`
	ID         TopicID `json:"id"`
	Partitions int32   `json:"partitions"`
	// Configs are the dynamic topic configs explicitly set (DYNAMIC_TOPIC_CONFIG), by
	// Kafka config name; nil when none.
	Configs map[string]string `json:"configs,omitempty"`
	// Mirror is the desired state of a mirror topic; nil for an ordinary topic.
	Mirror *MirrorTopic `json:"mirror,omitempty"`
	// Registrations holds the registration of every partition, by index (Partitions of
	// them in an Image).
	Registrations []*PartitionRegistration `json:"registrations,omitempty"`
}

// Partition returns the registration of partition p, nil when the topic has no such
// partition.
func (t *Topic) Partition(p int32) *PartitionRegistration {
	if p < 0 || int(p) >= len(t.Registrations) {
		return nil
	}
	return t.Registrations[p]
}

// MirrorTopic is the desired state of a mirror topic, kept in the metadata log (spec section
// 4, last paragraph). The actual per-partition states live in __mirror_state. Immutable once
// it is part of an Image.
type MirrorTopic struct {
	// MirrorName names the cluster mirror that owns the topic.
	MirrorName string `json:"mirrorName"`
	// Desired is what the operator asked for: mirroring, paused or stopped.
	Desired DesiredState `json:"desired"`
	// SourceTopicID is the topic ID on the source cluster (equal to the local topic ID for
	// a topic created by the mirror, spec section 2).
	SourceTopicID TopicID `json:"sourceTopicId"`
}

// DesiredState is the desired state of a mirror topic (spec sections 4, 5 and 10): what
// StartMirrorTopics, PauseMirrorTopics, ResumeMirrorTopics and StopMirrorTopics last asked.
type DesiredState int8

// Desired states of a mirror topic. The zero value is invalid, so that a forgotten field is
// refused with ErrInvalidRecord.
const (
	// DesiredMirroring: the topic is started (or resumed) and should be MIRRORING.
	DesiredMirroring DesiredState = 1
	// DesiredPaused: the topic should be PAUSED (PauseMirrorTopics).
	DesiredPaused DesiredState = 2
	// DesiredStopped: failover was requested or has finished (StopMirrorTopics); the topic
	// stays associated with its mirror so that describe and failback can find it.
	DesiredStopped DesiredState = 3
)

// String returns MIRRORING, PAUSED or STOPPED (spec section 4 names), or UNKNOWN(n).
func (d DesiredState) String() string {
	switch d {
	case DesiredMirroring:
		return "MIRRORING"
	case DesiredPaused:
		return "PAUSED"
	case DesiredStopped:
		return "STOPPED"
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(d))
}

func (d DesiredState) valid() bool {
	return d == DesiredMirroring || d == DesiredPaused || d == DesiredStopped
}

// Mirror is one cluster mirror (spec section 1): its name, its configuration (Kafka-style
// names, spec section 11), the source cluster ID resolved at create time and its creation
// time in ms since the epoch. Immutable.
type Mirror struct {
	Name            string            `json:"name"`
	Configs         map[string]string `json:"configs,omitempty"`
	SourceClusterID string            `json:"sourceClusterId"`
	CreatedMs       int64             `json:"createdMs"`
}

// emptyImage is the image before any record was applied.
func emptyImage() *Image {
	return &Image{
		Topics:        map[string]*Topic{},
		TopicsByID:    map[TopicID]*Topic{},
		Mirrors:       map[string]*Mirror{},
		BrokerConfigs: map[string]string{},
		NodeConfigs:   map[string]map[string]string{},
		Brokers:       map[int32]*BrokerRegistration{},
		ACLs:          map[TopicID]*AccessControlEntryRecord{},
	}
}

// Broker returns the registration of broker id.
func (im *Image) Broker(id int32) (*BrokerRegistration, bool) {
	b, ok := im.Brokers[id]
	return b, ok
}

// BrokerIDs returns the IDs of every registered broker, sorted.
func (im *Image) BrokerIDs() []int32 {
	out := make([]int32, 0, len(im.Brokers))
	for id := range im.Brokers {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// UsableBrokers returns the registered brokers that may lead partitions (Usable), sorted
// by ID.
func (im *Image) UsableBrokers() []*BrokerRegistration {
	var out []*BrokerRegistration
	for _, id := range im.BrokerIDs() {
		if b := im.Brokers[id]; b.Usable() {
			out = append(out, b)
		}
	}
	return out
}

// Topic returns the topic called name.
func (im *Image) Topic(name string) (*Topic, bool) {
	t, ok := im.Topics[name]
	return t, ok
}

// TopicByID returns the topic with topic ID id.
func (im *Image) TopicByID(id TopicID) (*Topic, bool) {
	t, ok := im.TopicsByID[id]
	return t, ok
}

// MirrorTopics returns the topics owned by the cluster mirror called mirror, in any
// desired state, sorted by name.
func (im *Image) MirrorTopics(mirror string) []*Topic {
	var out []*Topic
	for _, t := range im.Topics {
		if t.Mirror != nil && t.Mirror.MirrorName == mirror {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *Topic) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// TopicNames returns every topic name, sorted.
func (im *Image) TopicNames() []string {
	out := make([]string, 0, len(im.Topics))
	for n := range im.Topics {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
