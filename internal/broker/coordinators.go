package broker

// FindCoordinator v0–4 and the wiring of the group coordinator (over
// __consumer_offsets) and the mirror manager. Group APIs themselves are served by
// internal/group.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/record"
	"github.com/kmirror/kmirror/internal/storage"
)

// startCoordinators creates __consumer_offsets if missing, elects every partition of it
// locally and waits for the group coordinator to load them (a single node leads every
// partition, at the epoch of its log), then starts the mirror manager and the
// transaction coordinator.
func (b *Broker) startCoordinators() error {
	n := b.cfg.Int32("offsets.topic.num.partitions")
	if _, ok := b.meta.Image().Topics[OffsetsTopic]; !ok {
		if _, err := b.createTopic(b.ctx, OffsetsTopic, metadata.NewTopicID(), n, internalReplicationFactor, map[string]string{
			"cleanup.policy": "compact", "segment.bytes": strconv.Itoa(int(b.cfg.Int32("offsets.topic.segment.bytes"))),
		}, nil); err != nil {
			return fmt.Errorf("creating %s: %w", OffsetsTopic, err)
		}
	}
	b.groups = group.New(group.Options{
		NumPartitions:                n,
		OffsetsRetentionMs:           int64(b.cfg.Int32("offsets.retention.minutes")) * 60000,
		OffsetsRetentionCheckMs:      b.cfg.Int64("offsets.retention.check.interval.ms"),
		GroupMinSessionTimeoutMs:     b.cfg.Int32("group.min.session.timeout.ms"),
		GroupMaxSessionTimeoutMs:     b.cfg.Int32("group.max.session.timeout.ms"),
		GroupInitialRebalanceDelayMs: b.cfg.Int32("group.initial.rebalance.delay.ms"),
		GroupMaxSize:                 math.MaxInt32,
		Log: func(p int32) (group.PartitionLog, error) {
			l, err := b.Log(OffsetsTopic, p)
			if err != nil {
				return nil, err
			}
			return internalLog{l}, nil
		},
		TopicPartitionExists: func(topic string, p int32) bool {
			t := b.meta.Image().Topics[topic]
			return t != nil && p >= 0 && p < t.Partitions
		},
		Logger: b.logger, // the coordinator names its component
	})
	for p := int32(0); p < n; p++ {
		l, err := b.Log(OffsetsTopic, p)
		if err != nil {
			return fmt.Errorf("opening %s-%d: %w", OffsetsTopic, p, err)
		}
		b.groups.OnElection(p, l.LeaderEpoch())
	}
	if err := b.groups.AwaitLoaded(b.ctx); err != nil {
		return fmt.Errorf("loading consumer groups: %w", err)
	}
	// Mirroring starts before the transaction coordinator: loading the transaction log
	// completes prepared transactions by writing markers, and the marker writer must
	// already know which partitions are read-only mirror partitions.
	if b.newMirrors != nil {
		b.mirrors = b.newMirrors(b, b.cfg, b.logger) // the manager names its component
		if err := b.mirrors.Start(b.ctx); err != nil {
			return fmt.Errorf("starting cluster mirroring: %w", err)
		}
	}
	return b.startTxnCoordinator()
}

// internalReplicationFactor is the replication factor of the internal topics (Kafka's
// offsets.topic.replication.factor and transaction.state.log.replication.factor
// defaults), capped at what kmirror places (maxReplicationFactor).
const internalReplicationFactor = 3

// Mirrors is the cluster mirroring service as the broker's handlers use it
// (implemented by internal/mirror's Manager; wired by cmd/kmirror so that the broker
// does not depend on the mirror package).
type Mirrors interface {
	Start(ctx context.Context) error
	Close()
	// CheckWrite reports whether a client write may touch a partition; the message
	// follows POLICY_VIOLATION (spec §10).
	CheckWrite(topic string, partition int32, op string) (bool, string)
	DescribeMirrorConfigs(name string) ([]kmsg.DescribeConfigsResponseResourceConfig, error)
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
}

// NewMirrorsFunc builds the mirroring service over the broker (which implements the
// mirror package's Local interface) with the broker's configuration.
type NewMirrorsFunc func(local *Broker, cfg *config.Values, logger *slog.Logger) Mirrors

// internalLog adapts a partition log to the coordinators' logs (group.PartitionLog,
// txn.StateLog): internal records are appended as leader in one uncompressed batch.
type internalLog struct{ l *storage.Log }

func (il internalLog) Append(recs []record.KV) (int64, error) {
	b := record.Build(record.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Timestamp: nowMs()}, recs)
	info, err := il.l.AppendAsLeader(b, il.l.LeaderEpoch(), -1)
	if err != nil {
		return -1, err
	}
	return info.FirstOffset, nil
}

// AppendTransactional appends a TxnOffsetCommit's records as a transactional batch of
// the producer, as the coordinator (storage.Log.AppendAsCoordinator).
func (il internalLog) AppendTransactional(recs []record.KV, producerID int64, producerEpoch int16) (int64, error) {
	b := record.Build(record.BatchHeader{Attributes: record.TransactionalBit, ProducerID: producerID,
		ProducerEpoch: producerEpoch, BaseSequence: 0, Timestamp: nowMs()}, recs)
	info, err := il.l.AppendAsCoordinator(b, il.l.LeaderEpoch())
	if errors.Is(err, storage.ErrInvalidProducerEpoch) {
		return -1, kerr.InvalidProducerEpoch
	}
	if err != nil {
		return -1, err
	}
	return info.FirstOffset, nil
}

func (il internalLog) LogEndOffset() int64 { return il.l.LogEndOffset() }

// Scan calls fn for every batch from the one holding offset from to the LEO.
func (il internalLog) Scan(from int64, fn func(b record.Batch) error) (int64, error) {
	l := il.l
	off := max(from, l.LogStartOffset())
	for off < l.LogEndOffset() {
		data, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			return off, err
		}
		if len(data) == 0 {
			return off, nil
		}
		for len(data) > 0 {
			bt, rest, err := record.Next(data)
			if err != nil {
				return off, err
			}
			data = rest
			if bt.LastOffset() < off {
				continue
			}
			if err := fn(bt); err != nil {
				return off, err
			}
			off = bt.NextOffset()
		}
	}
	return off, nil
}

func (b *Broker) handleFindCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, k := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = k
		switch {
		case req.CoordinatorType > 1:
			// No share coordinator.
			c.ErrorCode = kerr.InvalidRequest.Code
			c.ErrorMessage = strp("kmirror coordinates groups and transactions only")
			c.NodeID = -1
		case req.CoordinatorType == 1 && k != "" && b.txns.EnsureTopic() != nil:
			// Kafka answers COORDINATOR_NOT_AVAILABLE until __transaction_state exists.
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			c.NodeID = -1
		case k == "":
			c.ErrorCode = kerr.InvalidRequest.Code
			c.NodeID = -1
		default:
			c.NodeID, c.Host, c.Port = b.nodeID, b.host, b.port
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		resp.Coordinators = nil
	}
	return resp
}

// handleMirrorRPC serves the cluster mirroring RPCs of spec section 10, or returns nil
// for another request. Inter-broker RPCs (ReadMirrorStates, WriteMirrorStates,
// BumpLeaderEpochs) have no use on a single node and are not advertised.
func (b *Broker) handleMirrorRPC(ctx context.Context, req kmsg.Request) kmsg.Response {
	m := b.mirrors
	if m == nil {
		return nil
	}
	switch r := req.(type) {
	case *mirrorproto.CreateClusterMirrorRequest:
		return m.CreateClusterMirror(ctx, r)
	case *mirrorproto.StartMirrorTopicsRequest:
		return m.StartMirrorTopics(ctx, r)
	case *mirrorproto.StopMirrorTopicsRequest:
		return m.StopMirrorTopics(ctx, r)
	case *mirrorproto.ListClusterMirrorsRequest:
		return m.ListClusterMirrors(ctx, r)
	case *mirrorproto.DescribeClusterMirrorsRequest:
		return m.DescribeClusterMirrors(ctx, r)
	case *mirrorproto.PauseMirrorTopicsRequest:
		return m.PauseMirrorTopics(ctx, r)
	case *mirrorproto.ResumeMirrorTopicsRequest:
		return m.ResumeMirrorTopics(ctx, r)
	case *mirrorproto.DeleteClusterMirrorRequest:
		return m.DeleteClusterMirror(ctx, r)
	case *mirrorproto.RecoverMirrorTopicsRequest:
		return m.RecoverMirrorTopics(ctx, r)
	}
	return nil
}

// mirrorErrorCode maps a mirror manager error to a code for a standard config RPC:
// RESOURCE_NOT_FOUND for an unknown mirror, INVALID_CONFIG otherwise; the message
// (which names the KIP error) goes in ErrorMessage.
func mirrorErrorCode(err error) int16 {
	var me *mirrorproto.Error
	if errors.As(err, &me) && me.Code == mirrorproto.UnknownClusterMirror {
		return kerr.ResourceNotFound.Code
	}
	return kerr.InvalidConfig.Code
}
