package broker

// The wiring of the group coordinator (over __consumer_offsets) and the mirror manager.
// Group APIs themselves are served by internal/group, the mirror RPCs by internal/mirror.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/partition"
	"github.com/kmirror/kmirror/internal/record"
	"github.com/kmirror/kmirror/internal/storage"
	"github.com/kmirror/kmirror/internal/txn"
)

// startCoordinators creates __consumer_offsets if missing, starts the group coordinator
// on the partitions of it this broker leads (later leaderships reach it through
// onLeadershipChange), then starts the mirror manager and the transaction coordinator. A
// one-node cluster leads every partition: it waits for them to be loaded.
func (b *Broker) startCoordinators() error {
	n := b.internalPartitions(OffsetsTopic)
	if b.node.Legacy {
		// A multi-node cluster creates it at the first FindCoordinator, as Kafka does.
		if err := b.ensureOffsetsTopic(); err != nil {
			return err
		}
	}
	groups := group.New(group.Options{
		NumPartitions:                n,
		OffsetsRetentionMs:           int64(b.cfg.Int32("offsets.retention.minutes")) * 60000,
		OffsetsRetentionCheckMs:      b.cfg.Int64("offsets.retention.check.interval.ms"),
		GroupMinSessionTimeoutMs:     b.cfg.Int32("group.min.session.timeout.ms"),
		GroupMaxSessionTimeoutMs:     b.cfg.Int32("group.max.session.timeout.ms"),
		GroupInitialRebalanceDelayMs: b.cfg.Int32("group.initial.rebalance.delay.ms"),
		GroupMaxSize:                 math.MaxInt32,
		Log: func(p int32) (group.PartitionLog, error) {
			part, err := b.leader(OffsetsTopic, p)
			if err != nil {
				return nil, err
			}
			return internalLog{part}, nil
		},
		TopicPartitionExists: func(topic string, p int32) bool {
			t := b.meta.Image().Topics[topic]
			return t != nil && p >= 0 && p < t.Partitions
		},
		Logger: b.logger, // the coordinator names its component
	})
	if err := b.awaitAllLed(OffsetsTopic); err != nil {
		return err
	}
	b.coordMu.Lock()
	b.groups = groups
	b.electLedCoordinators(OffsetsTopic)
	b.coordMu.Unlock()
	if b.node.Legacy {
		if err := b.groups.AwaitLoaded(b.ctx); err != nil {
			return fmt.Errorf("loading consumer groups: %w", err)
		}
	}
	// Mirroring starts before the transaction coordinator: loading the transaction log
	// completes prepared transactions by writing markers, and the marker writer must
	// already know which partitions are read-only mirror partitions.
	if b.newMirrors != nil {
		mirrors := b.newMirrors(b, b.cfg, b.logger) // the manager names its component
		// before this broker serves: no follower has fetched from the partitions it leads
		// yet, so those it already leads are held as a new leader is
		b.rm.SetHoldOnLead(mirrors.HoldOnLead)
		if err := b.awaitAllLed(mirrorStateTopic); err != nil {
			return err
		}
		b.coordMu.Lock()
		b.mirrors = mirrors
		b.electLedCoordinators(mirrorStateTopic)
		b.coordMu.Unlock()
		if err := b.mirrors.Start(b.ctx); err != nil {
			return fmt.Errorf("starting cluster mirroring: %w", err)
		}
	}
	return b.startTxnCoordinator()
}

// byGroups adapts a handler of the group coordinator to a handler of the broker's (the
// group APIs' registrations: joingroup.go, heartbeat.go, ...).
func byGroups[Req kmsg.Request, Resp kmsg.Response](m func(*group.Coordinator, context.Context, Req) Resp) func(*Broker, context.Context, Req) kmsg.Response {
	return func(b *Broker, ctx context.Context, req Req) kmsg.Response { return m(b.groups, ctx, req) }
}

// internalTopicRF are the keys of the internal topics' replication factors.
var internalTopicRF = map[string]string{
	OffsetsTopic:     "offsets.topic.replication.factor",
	txn.TopicName:    "transaction.state.log.replication.factor",
	"__mirror_state": "mirror.state.topic.replication.factor",
}

// internalReplicationFactor is the replication factor an internal topic is created with:
// its key's value, or 1 on a one-node cluster where the key is not set (as Apache Kafka's
// single-node config file sets them), Kafka's default 3 otherwise.
func (b *Broker) internalReplicationFactor(topic string) int16 {
	key := internalTopicRF[topic]
	if v, ok := b.cfg.Get(key); ok || !b.node.Legacy {
		n, _ := strconv.Atoi(v)
		return int16(n)
	}
	return 1
}

// internalPartitionsKey are the keys of the internal topics' partition counts.
var internalPartitionsKey = map[string]string{
	OffsetsTopic:     "offsets.topic.num.partitions",
	txn.TopicName:    "transaction.state.log.num.partitions",
	mirrorStateTopic: "mirror.state.topic.num.partitions",
}

// internalPartitions is the partition count of an internal topic: the topic's when it
// exists (a changed config does not move groups or transactions to other partitions, as
// Kafka's coordinators read the topic's count), else its key's, for creating it.
func (b *Broker) internalPartitions(topic string) int32 {
	if t, ok := b.meta.Image().Topics[topic]; ok {
		return t.Partitions
	}
	return b.cfg.Int32(internalPartitionsKey[topic])
}

// errNotEnoughBrokers is returned while fewer brokers are registered than an internal
// topic's replication factor: the topic is created once they are (Kafka answers
// COORDINATOR_NOT_AVAILABLE meanwhile).
var errNotEnoughBrokers = errors.New("not enough brokers")

// ensureInternalTopic creates an internal topic unless it exists, once as many brokers
// are registered as its replication factor (another broker may create it at the same
// time: then it exists). Errors: errNotEnoughBrokers (logged with the key), and those of
// createTopic.
func (b *Broker) ensureInternalTopic(name string, partitions int32, configs map[string]string) error {
	if _, ok := b.meta.Image().Topics[name]; ok {
		return nil
	}
	rf := b.internalReplicationFactor(name)
	if n := len(b.meta.Image().Brokers); n < int(rf) {
		b.logger.Warn("an internal topic waits for brokers: fewer are registered than its replication factor",
			"topic", name, "brokers", n, internalTopicRF[name], rf)
		return fmt.Errorf("%w: %s needs %s=%d registered brokers, %d are", errNotEnoughBrokers, name, internalTopicRF[name], rf, n)
	}
	_, err := b.createTopic(b.ctx, name, metadata.NewTopicID(), partitions, rf, configs, nil)
	if errors.Is(err, metadata.ErrTopicExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	return nil
}

// ensureOffsetsTopic creates __consumer_offsets (ensureInternalTopic).
func (b *Broker) ensureOffsetsTopic() error {
	return b.ensureInternalTopic(OffsetsTopic, b.internalPartitions(OffsetsTopic), map[string]string{
		"cleanup.policy": "compact", "segment.bytes": strconv.Itoa(int(b.cfg.Int32("offsets.topic.segment.bytes"))),
	})
}

// awaitAllLed waits, on a one-node cluster, until it leads every partition of topic (its
// controller assigns the partitions of a data directory written before clusters a moment
// after start); a multi-node cluster does not wait.
func (b *Broker) awaitAllLed(topic string) error {
	if !b.node.Legacy {
		return nil
	}
	t := b.meta.Image().Topics[topic]
	for p := int32(0); t != nil && p < t.Partitions; p++ {
		if _, err := b.Partition(topic, p); err != nil {
			return fmt.Errorf("opening %s: %w", topic, err)
		}
	}
	return nil
}

// Mirrors is the cluster mirroring service as the broker's handlers use it
// (implemented by internal/mirror's Manager; wired by cmd/kmirror so that the broker
// does not depend on the mirror package).
type Mirrors interface {
	Start(ctx context.Context) error
	Close()
	// CheckWrite reports whether a client write may touch a partition; the message
	// follows POLICY_VIOLATION (spec §10).
	CheckWrite(topic string, partition int32, op string) (bool, string)
	DescribeMirrorConfigs(ctx context.Context, name string) ([]kmsg.DescribeConfigsResponseResourceConfig, error)
	AlterMirrorConfigs(ctx context.Context, name string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) error
	CreateClusterMirror(context.Context, *mirrorproto.CreateClusterMirrorRequest) *mirrorproto.CreateClusterMirrorResponse
	StartMirrorTopics(context.Context, *mirrorproto.StartMirrorTopicsRequest) *mirrorproto.StartMirrorTopicsResponse
	StopMirrorTopics(context.Context, *mirrorproto.StopMirrorTopicsRequest) *mirrorproto.StopMirrorTopicsResponse
	ListClusterMirrors(context.Context, *mirrorproto.ListClusterMirrorsRequest) *mirrorproto.ListClusterMirrorsResponse
	DescribeClusterMirrors(context.Context, *mirrorproto.DescribeClusterMirrorsRequest) *mirrorproto.DescribeClusterMirrorsResponse
	PauseMirrorTopics(context.Context, *mirrorproto.PauseMirrorTopicsRequest) *mirrorproto.PauseMirrorTopicsResponse
	ResumeMirrorTopics(context.Context, *mirrorproto.ResumeMirrorTopicsRequest) *mirrorproto.ResumeMirrorTopicsResponse
	DeleteClusterMirror(context.Context, *mirrorproto.DeleteClusterMirrorRequest) *mirrorproto.DeleteClusterMirrorResponse
	RecoverMirrorTopics(context.Context, *mirrorproto.RecoverMirrorTopicsRequest) *mirrorproto.RecoverMirrorTopicsResponse
	// ReadMirrorStates and WriteMirrorStates serve the partitions of __mirror_state this
	// broker coordinates (inter-broker).
	ReadMirrorStates(context.Context, *mirrorproto.ReadMirrorStatesRequest) *mirrorproto.ReadMirrorStatesResponse
	WriteMirrorStates(context.Context, *mirrorproto.WriteMirrorStatesRequest) *mirrorproto.WriteMirrorStatesResponse
	// StatePartitionElected and StatePartitionResigned follow this broker's leadership
	// of the partitions of __mirror_state; LeadershipChanged tells it of any leadership
	// change (without blocking).
	StatePartitionElected(partition int32, leaderEpoch int32)
	StatePartitionResigned(partition int32)
	LeadershipChanged()
	// HoldOnLead is the replica manager's HoldOnLead (partition.HoldOnLeadFunc): whether a
	// partition this broker becomes leader of starts with its HW held until the mirror
	// runtime that will run it decides (an untrusted log, cluster.md §3).
	HoldOnLead(im *metadata.Image, t *metadata.Topic, partition int32) bool
}

// NewMirrorsFunc builds the mirroring service over the broker (which implements the
// mirror package's Local interface) with the broker's configuration.
type NewMirrorsFunc func(local *Broker, cfg *config.Values, logger *slog.Logger) Mirrors

// internalLog adapts a partition this broker leads to the coordinators' logs
// (group.PartitionLog, txn.StateLog): internal records are appended as leader in one
// uncompressed batch.
type internalLog struct{ p *partition.Partition }

// internalWriteTimeout bounds a coordinator's acks=all write (Kafka's
// offsets.commit.timeout.ms default).
const internalWriteTimeout = 5 * time.Second

func (il internalLog) Append(recs []record.KV) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), internalWriteTimeout)
	defer cancel()
	return il.p.AppendRecordsAsLeader(ctx, recs, nowMs())
}

// AppendTransactional appends a TxnOffsetCommit's records as a transactional batch of
// the producer, as the coordinator (storage.Log.AppendAsCoordinator).
func (il internalLog) AppendTransactional(recs []record.KV, producerID int64, producerEpoch int16) (int64, error) {
	b := record.Build(record.BatchHeader{Attributes: record.TransactionalBit, ProducerID: producerID,
		ProducerEpoch: producerEpoch, BaseSequence: 0, Timestamp: nowMs()}, recs)
	ctx, cancel := context.WithTimeout(context.Background(), internalWriteTimeout)
	defer cancel()
	info, err := il.p.AppendAsCoordinator(ctx, b)
	if errors.Is(err, storage.ErrInvalidProducerEpoch) {
		return -1, kerr.InvalidProducerEpoch
	}
	if err != nil {
		return -1, err
	}
	return info.FirstOffset, nil
}

func (il internalLog) LogEndOffset() int64 { return il.p.Log().LogEndOffset() }

// Scan calls fn for every batch from the one holding offset from to the LEO.
func (il internalLog) Scan(from int64, fn func(b record.Batch) error) (int64, error) {
	l := il.p.Log()
	off := max(from, l.LogStartOffset())
	for off < l.LogEndOffset() {
		data, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			return off, err
		}
		if len(data) == 0 {
			return off, nil
		}
		it := record.IterBatches(data)
		for it.Next() {
			bt := it.Batch()
			if bt.LastOffset() < off {
				continue
			}
			if err := fn(bt); err != nil {
				return off, err
			}
			off = bt.NextOffset()
		}
		if err := it.Err(); err != nil {
			return off, err
		}
	}
	return off, nil
}
