package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Record is one metadata record, the counterpart of a KRaft metadata record
// (org.apache.kafka.common.metadata.*Record). Records are applied in log order to an Image;
// Controller.Apply writes several as one atomic batch.
type Record interface{ isRecord() }

// ClusterRecord sets the cluster ID; it is written once, at bootstrap, and refused
// (ErrInvalidRecord) when the image already has a cluster ID.
type ClusterRecord struct {
	ClusterID string `json:"clusterId"`
}

// TopicRecord creates a topic (Kafka's TopicRecord plus its PartitionRecords, configs and,
// for a mirror topic, its desired mirror state). Errors: ErrTopicExists (name or topic ID
// taken), ErrInvalidPartitions (Partitions < 1), ErrUnknownMirror, ErrInvalidRecord.
type TopicRecord struct {
	Name       string            `json:"name"`
	ID         TopicID           `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	Mirror     *MirrorTopic      `json:"mirror,omitempty"`
}

// PartitionCountRecord grows a topic to Partitions partitions (CreatePartitions). Errors:
// ErrUnknownTopic, ErrInvalidPartitions (not more than the current count).
type PartitionCountRecord struct {
	Name       string `json:"name"`
	Partitions int32  `json:"partitions"`
}

// RemoveTopicRecord deletes a topic (Kafka's RemoveTopicRecord). Errors: ErrUnknownTopic.
type RemoveTopicRecord struct {
	ID TopicID `json:"id"`
}

// Config resource types of ConfigRecord: Kafka's ConfigResource.Type values, plus the
// prototype's CLUSTER_MIRROR (spec section 10).
const (
	ResourceTopic         int8 = 2
	ResourceBroker        int8 = 4
	ResourceClusterMirror int8 = 64
)

// ConfigRecord sets (Value non-nil) or deletes (Value nil) one dynamic config (Kafka's
// ConfigRecord). ResourceType is ResourceTopic (ResourceName = topic name),
// ResourceBroker (ResourceName "" = cluster-wide default, or a broker ID) or
// ResourceClusterMirror (ResourceName = mirror name). Errors: ErrUnknownTopic,
// ErrUnknownMirror, ErrInvalidRecord (other resource types, empty config name).
type ConfigRecord struct {
	ResourceType int8    `json:"resourceType"`
	ResourceName string  `json:"resourceName"`
	Name         string  `json:"name"`
	Value        *string `json:"value"`
}

// MirrorRecord creates a cluster mirror (CreateClusterMirror, spec section 10). Errors:
// ErrMirrorExists, ErrInvalidRecord (empty name).
type MirrorRecord struct {
	Name            string            `json:"name"`
	Configs         map[string]string `json:"configs,omitempty"`
	SourceClusterID string            `json:"sourceClusterId"`
	CreatedMs       int64             `json:"createdMs"`
}

// RemoveMirrorRecord deletes a cluster mirror (DeleteClusterMirror). Topics still
// associated with it become ordinary topics. Errors: ErrUnknownMirror.
type RemoveMirrorRecord struct {
	Name string `json:"name"`
}

// MirrorTopicRecord sets or replaces the desired mirror state of a topic; a nil Mirror
// detaches it (an ordinary topic). Errors: ErrUnknownTopic, ErrUnknownMirror,
// ErrInvalidRecord (invalid desired state).
type MirrorTopicRecord struct {
	Topic  string       `json:"topic"`
	Mirror *MirrorTopic `json:"mirror"`
}

// PartitionRecord sets the whole registration of one partition (Kafka's PartitionRecord):
// written in the batch of the TopicRecord or PartitionCountRecord that creates the
// partition, or for a partition that has no replicas yet (topics written by a release
// before clusters, which carry no assignment). PartitionEpoch is set by the record as
// written. AddingReplicas and RemovingReplicas (a reassignment in progress), ELR and
// LastKnownELR (KIP-966) and LeaderRecoveryState are Kafka's fields of the same names;
// records written before replication lack them (empty, RECOVERED). Errors:
// ErrUnknownTopic, ErrInvalidRecord (index outside the topic, partition already
// assigned, and the invariants of checkPartition), ErrStalePlacement (a replica on an
// unregistered broker, a leader that is fenced or shutting down).
type PartitionRecord struct {
	TopicID             TopicID `json:"topicId"`
	Partition           int32   `json:"partition"`
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

// PartitionChangeRecord changes one partition (Kafka's PartitionChangeRecord, written by
// the active controller's elections, AlterPartition, ElectLeaders, leader-epoch bumps
// and, later, reassignments). A nil field keeps its value; an empty, non-nil list sets
// the list empty (so ISR, Replicas and the others encode null for "unchanged"). LeaderEpoch
// is the partition's leader epoch after the change: the current one, or a higher one; a
// leader change (Leader set to another broker, or to NoLeader) must raise it (Kafka's
// merge raises it by one whenever the record sets Leader; the controller writes that
// epoch here). Every change adds one to the partition epoch. Errors: ErrUnknownTopic,
// ErrInvalidRecord (no such partition, an unassigned partition, a leader epoch that goes
// down or stays with a new leader, a leader recovery state other than 0 and 1, and the
// invariants of checkPartition on the result).
type PartitionChangeRecord struct {
	TopicID             TopicID `json:"topicId"`
	Partition           int32   `json:"partition"`
	Leader              *int32  `json:"leader,omitempty"`
	ISR                 []int32 `json:"isr"` // null = unchanged
	LeaderEpoch         int32   `json:"leaderEpoch"`
	LeaderRecoveryState *int8   `json:"leaderRecoveryState,omitempty"`
	// Replicas, RemovingReplicas and AddingReplicas change the assignment (reassignment).
	Replicas         []int32 `json:"replicas,omitempty"`
	RemovingReplicas []int32 `json:"removingReplicas"` // null = unchanged
	AddingReplicas   []int32 `json:"addingReplicas"`   // null = unchanged
	// ELR and LastKnownELR are KIP-966's eligible leader replicas.
	ELR          []int32 `json:"elr"`          // null = unchanged
	LastKnownELR []int32 `json:"lastKnownElr"` // null = unchanged
}

// RegisterBrokerRecord registers a broker (Kafka's RegisterBrokerRecord), replacing any
// earlier registration of the same broker ID. The broker epoch of the registration is the
// metadata offset of the batch that holds the record, as in Kafka. Errors:
// ErrInvalidRecord (negative broker ID, no endpoint, an endpoint without a name or with a
// port outside 1–65535).
type RegisterBrokerRecord struct {
	BrokerID      int32      `json:"brokerId"`
	IncarnationID TopicID    `json:"incarnationId"`
	Endpoints     []Endpoint `json:"endpoints"`
	Rack          string     `json:"rack,omitempty"`
	Fenced        bool       `json:"fenced"`
}

// BrokerRegistrationChangeRecord fences or unfences a broker, or marks it as in
// controlled shutdown (Kafka's BrokerRegistrationChangeRecord, which also stands for its
// FenceBrokerRecord and UnfenceBrokerRecord). Nil fields keep their value. Errors:
// ErrUnknownBroker (no registration with that ID and broker epoch).
type BrokerRegistrationChangeRecord struct {
	BrokerID             int32 `json:"brokerId"`
	BrokerEpoch          int64 `json:"brokerEpoch"`
	Fenced               *bool `json:"fenced,omitempty"`
	InControlledShutdown *bool `json:"inControlledShutdown,omitempty"`
}

// UnregisterBrokerRecord removes a broker's registration (Kafka's UnregisterBrokerRecord).
// Errors: ErrUnknownBroker.
type UnregisterBrokerRecord struct {
	BrokerID    int32 `json:"brokerId"`
	BrokerEpoch int64 `json:"brokerEpoch"`
}

// ProducerIDsRecord hands the producer IDs below NextProducerID out (Kafka's
// ProducerIdsRecord, written for AllocateProducerIds): the requesting broker owns the
// block [previous NextProducerID, NextProducerID). Errors: ErrInvalidRecord
// (NextProducerID not above the current one).
type ProducerIDsRecord struct {
	BrokerID       int32 `json:"brokerId"`
	BrokerEpoch    int64 `json:"brokerEpoch"`
	NextProducerID int64 `json:"nextProducerId"`
}

// SCRAM credentials (Kafka's UserScramCredentialRecord and
// RemoveUserScramCredentialRecord, written for AlterUserScramCredentials and by
// `kmirror storage format --add-scram`).

// UserScramCredentialRecord sets the SCRAM credential of a user for one mechanism
// (ScramCodeSHA256 = 1, ScramCodeSHA512 = 2, as Kafka's ScramMechanism): the salt, stored
// key, server key and iteration count, never the password. Errors: ErrInvalidRecord
// (empty name, unknown mechanism).
type UserScramCredentialRecord struct {
	Name       string `json:"name"`
	Mechanism  int8   `json:"mechanism"`
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
	Iterations int32  `json:"iterations"`
}

// RemoveUserScramCredentialRecord removes the credential of a user for one mechanism.
// Errors: ErrUnknownScramCredential.
type RemoveUserScramCredentialRecord struct {
	Name      string `json:"name"`
	Mechanism int8   `json:"mechanism"`
}

func (UserScramCredentialRecord) isRecord()       {}
func (RemoveUserScramCredentialRecord) isRecord() {}

// ErrUnknownScramCredential: the user has no credential of that mechanism
// (RESOURCE_NOT_FOUND).
var ErrUnknownScramCredential = errors.New("no such SCRAM credential")

func (ClusterRecord) isRecord()        {}
func (TopicRecord) isRecord()          {}
func (PartitionCountRecord) isRecord() {}
func (RemoveTopicRecord) isRecord()    {}
func (ConfigRecord) isRecord()         {}
func (MirrorRecord) isRecord()         {}
func (RemoveMirrorRecord) isRecord()   {}
func (MirrorTopicRecord) isRecord()    {}

func (PartitionRecord) isRecord()                {}
func (PartitionChangeRecord) isRecord()          {}
func (RegisterBrokerRecord) isRecord()           {}
func (BrokerRegistrationChangeRecord) isRecord() {}
func (UnregisterBrokerRecord) isRecord()         {}
func (ProducerIDsRecord) isRecord()              {}

// ACL records (authorization, docs/authorization.md).

// AccessControlEntryRecord stores one ACL binding under its ID (Kafka's
// AccessControlEntryRecord): the resource pattern (ResourceType, ResourceName,
// PatternType) and the entry (Principal, Host, Operation, PermissionType), with Kafka's
// codes (internal/acl). Errors: ErrInvalidRecord (zero ID, an ID in use, empty name,
// principal or host).
type AccessControlEntryRecord struct {
	ID             TopicID `json:"id"`
	ResourceType   int8    `json:"resourceType"`
	ResourceName   string  `json:"resourceName"`
	PatternType    int8    `json:"patternType"`
	Principal      string  `json:"principal"`
	Host           string  `json:"host"`
	Operation      int8    `json:"operation"`
	PermissionType int8    `json:"permissionType"`
}

// RemoveAccessControlEntryRecord deletes the ACL binding of ID (Kafka's
// RemoveAccessControlEntryRecord). Errors: ErrUnknownACL.
type RemoveAccessControlEntryRecord struct {
	ID TopicID `json:"id"`
}

func (AccessControlEntryRecord) isRecord()       {}
func (RemoveAccessControlEntryRecord) isRecord() {}

// ErrUnknownACL: no ACL binding with that ID.
var ErrUnknownACL = errors.New("unknown ACL binding")

// Errors of Apply. They are wrapped with a message naming the topic or mirror; test with
// errors.Is. The broker maps them to Kafka errors.
var (
	// ErrTopicExists: a topic with this name or topic ID exists (TOPIC_ALREADY_EXISTS).
	ErrTopicExists = errors.New("topic already exists")
	// ErrUnknownTopic: no such topic (UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID).
	ErrUnknownTopic = errors.New("unknown topic")
	// ErrInvalidPartitions: a partition count below 1 or not above the current count
	// (INVALID_PARTITIONS).
	ErrInvalidPartitions = errors.New("invalid partition count")
	// ErrUnknownMirror: no such cluster mirror (UNKNOWN_CLUSTER_MIRROR).
	ErrUnknownMirror = errors.New("unknown cluster mirror")
	// ErrMirrorExists: a cluster mirror with this name exists (CLUSTER_MIRROR_ALREADY_EXISTS).
	ErrMirrorExists = errors.New("cluster mirror already exists")
	// ErrUnknownBroker: no registration of that broker ID and broker epoch
	// (STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED).
	ErrUnknownBroker = errors.New("unknown broker")
	// ErrStalePlacement: a new partition placed on a broker that is not registered, or led
	// by one that is fenced or in controlled shutdown; the placement must be computed again
	// from a newer image.
	ErrStalePlacement = errors.New("stale replica placement")
	// ErrInvalidRecord: a record that is malformed on its own (empty name, zero topic ID,
	// unknown config resource type or desired state, second cluster ID) (INVALID_REQUEST).
	ErrInvalidRecord = errors.New("invalid metadata record")
)

// batchVersion is the version of the encoding of one raft log entry.
const batchVersion = 1

// Record type tags inside an encoded batch. Never reuse or renumber a tag.
const (
	tagCluster        = "cluster"
	tagTopic          = "topic"
	tagPartitionCount = "partitionCount"
	tagRemoveTopic    = "removeTopic"
	tagConfig         = "config"
	tagMirror         = "mirror"
	tagRemoveMirror   = "removeMirror"
	tagMirrorTopic    = "mirrorTopic"

	tagPartition        = "partition"
	tagPartitionChange  = "partitionChange"
	tagRegisterBroker   = "registerBroker"
	tagBrokerChange     = "brokerRegistrationChange"
	tagUnregisterBroker = "unregisterBroker"
	tagProducerIDs      = "producerIds"

	tagAccessControlEntry        = "accessControlEntry"
	tagRemoveAccessControlEntry  = "removeAccessControlEntry"
	tagUserScramCredential       = "userScramCredential"
	tagRemoveUserScramCredential = "removeUserScramCredential"
)

// wireBatch is one raft log entry: a versioned list of tagged records, as JSON.
type wireBatch struct {
	Version int          `json:"v"`
	Records []wireRecord `json:"records"`
}

type wireRecord struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// encodeBatch encodes recs as one raft log entry.
func encodeBatch(recs []Record) ([]byte, error) {
	b := wireBatch{Version: batchVersion, Records: make([]wireRecord, 0, len(recs))}
	for _, r := range recs {
		var tag string
		switch r.(type) {
		case ClusterRecord, *ClusterRecord:
			tag = tagCluster
		case TopicRecord, *TopicRecord:
			tag = tagTopic
		case PartitionCountRecord, *PartitionCountRecord:
			tag = tagPartitionCount
		case RemoveTopicRecord, *RemoveTopicRecord:
			tag = tagRemoveTopic
		case ConfigRecord, *ConfigRecord:
			tag = tagConfig
		case MirrorRecord, *MirrorRecord:
			tag = tagMirror
		case RemoveMirrorRecord, *RemoveMirrorRecord:
			tag = tagRemoveMirror
		case MirrorTopicRecord, *MirrorTopicRecord:
			tag = tagMirrorTopic
		case PartitionRecord, *PartitionRecord:
			tag = tagPartition
		case PartitionChangeRecord, *PartitionChangeRecord:
			tag = tagPartitionChange
		case RegisterBrokerRecord, *RegisterBrokerRecord:
			tag = tagRegisterBroker
		case BrokerRegistrationChangeRecord, *BrokerRegistrationChangeRecord:
			tag = tagBrokerChange
		case UnregisterBrokerRecord, *UnregisterBrokerRecord:
			tag = tagUnregisterBroker
		case ProducerIDsRecord, *ProducerIDsRecord:
			tag = tagProducerIDs
		case AccessControlEntryRecord, *AccessControlEntryRecord:
			tag = tagAccessControlEntry
		case RemoveAccessControlEntryRecord, *RemoveAccessControlEntryRecord:
			tag = tagRemoveAccessControlEntry
		case UserScramCredentialRecord, *UserScramCredentialRecord:
			tag = tagUserScramCredential
		case RemoveUserScramCredentialRecord, *RemoveUserScramCredentialRecord:
			tag = tagRemoveUserScramCredential
		default:
			return nil, fmt.Errorf("%w: unknown record type %T", ErrInvalidRecord, r)
		}
		data, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode %T: %w", r, err)
		}
		b.Records = append(b.Records, wireRecord{Type: tag, Data: data})
	}
	return json.Marshal(b)
}

// decodeBatch decodes one raft log entry written by encodeBatch. Records come back as
// values (never pointers).
func decodeBatch(p []byte) ([]Record, error) {
	var b wireBatch
	if err := json.Unmarshal(p, &b); err != nil {
		return nil, fmt.Errorf("decode metadata batch: %w", err)
	}
	if b.Version != batchVersion {
		return nil, fmt.Errorf("decode metadata batch: unsupported version %d", b.Version)
	}
	recs := make([]Record, 0, len(b.Records))
	for _, w := range b.Records {
		var r Record
		var err error
		switch w.Type {
		case tagCluster:
			r, err = decodeAs[ClusterRecord](w.Data)
		case tagTopic:
			r, err = decodeAs[TopicRecord](w.Data)
		case tagPartitionCount:
			r, err = decodeAs[PartitionCountRecord](w.Data)
		case tagRemoveTopic:
			r, err = decodeAs[RemoveTopicRecord](w.Data)
		case tagConfig:
			r, err = decodeAs[ConfigRecord](w.Data)
		case tagMirror:
			r, err = decodeAs[MirrorRecord](w.Data)
		case tagRemoveMirror:
			r, err = decodeAs[RemoveMirrorRecord](w.Data)
		case tagMirrorTopic:
			r, err = decodeAs[MirrorTopicRecord](w.Data)
		case tagPartition:
			r, err = decodeAs[PartitionRecord](w.Data)
		case tagPartitionChange:
			r, err = decodeAs[PartitionChangeRecord](w.Data)
		case tagRegisterBroker:
			r, err = decodeAs[RegisterBrokerRecord](w.Data)
		case tagBrokerChange:
			r, err = decodeAs[BrokerRegistrationChangeRecord](w.Data)
		case tagUnregisterBroker:
			r, err = decodeAs[UnregisterBrokerRecord](w.Data)
		case tagProducerIDs:
			r, err = decodeAs[ProducerIDsRecord](w.Data)
		case tagAccessControlEntry:
			r, err = decodeAs[AccessControlEntryRecord](w.Data)
		case tagRemoveAccessControlEntry:
			r, err = decodeAs[RemoveAccessControlEntryRecord](w.Data)
		case tagUserScramCredential:
			r, err = decodeAs[UserScramCredentialRecord](w.Data)
		case tagRemoveUserScramCredential:
			r, err = decodeAs[RemoveUserScramCredentialRecord](w.Data)
		default:
			err = fmt.Errorf("unknown record type %q", w.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("decode metadata batch: %w", err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

func decodeAs[T Record](data json.RawMessage) (Record, error) {
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%T: %w", v, err)
	}
	return v, nil
}

// EncodeBatch encodes recs as one metadata log entry (the form ApplyRecords forwards).
func EncodeBatch(recs []Record) ([]byte, error) { return encodeBatch(recs) }

// DecodeBatch decodes a batch written by EncodeBatch.
func DecodeBatch(p []byte) ([]Record, error) { return decodeBatch(p) }
