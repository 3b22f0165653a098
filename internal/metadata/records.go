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

func (ClusterRecord) isRecord()        {}
func (TopicRecord) isRecord()          {}
func (PartitionCountRecord) isRecord() {}
func (RemoveTopicRecord) isRecord()    {}
func (ConfigRecord) isRecord()         {}
func (MirrorRecord) isRecord()         {}
func (RemoveMirrorRecord) isRecord()   {}
func (MirrorTopicRecord) isRecord()    {}

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
