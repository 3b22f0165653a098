package broker

// What the mirror manager (internal/mirror's Local) needs of its broker beyond the
// partitions: leader-epoch bumps through the controller, inter-broker requests, the
// cluster's consumer groups wherever they are coordinated, and partition bounds.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/partition"
)

// Leads reports whether this broker leads topic/p now (mirror.Local).
func (b *Broker) Leads(topic string, p int32) bool {
	_, err := b.rm.Leader(topic, p)
	return err == nil
}

// BumpLeaderEpoch has the active controller raise topic/p's leader epoch to at least
// epoch (BumpLeaderEpochs) and waits until this broker's partition is registered with it
// (mirror.Local). Errors: the controller's per-partition error, NOT_LEADER_OR_FOLLOWER
// when another broker leads the partition meanwhile, ctx's.
func (b *Broker) BumpLeaderEpoch(ctx context.Context, topic string, p int32, epoch int32) error {
	t := b.rm.Image().Topics[topic]
	if t == nil {
		return partition.ErrUnknownTopicOrPartition
	}
	req := &mirrorproto.BumpLeaderEpochsRequest{Topics: []mirrorproto.BumpLeaderEpochsRequestTopic{{
		TopicID: t.ID, Partitions: []mirrorproto.BumpLeaderEpochsRequestPartition{{PartitionIndex: p, MinLeaderEpoch: epoch}},
	}}}
	resp, err := b.channel.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("BumpLeaderEpochs: %w", err)
	}
	r := resp.(*mirrorproto.BumpLeaderEpochsResponse)
	if r.ErrorCode != 0 {
		return fmt.Errorf("BumpLeaderEpochs: %w", kerr.ErrorForCode(r.ErrorCode))
	}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				return fmt.Errorf("BumpLeaderEpochs %s-%d: %w", topic, p, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
	for {
		ch := b.rm.Changed()
		part, err := b.rm.Leader(topic, p)
		if err != nil {
			return err
		}
		if reg := part.Registration(); reg != nil && reg.LeaderEpoch >= epoch {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for leader epoch %d of %s-%d: %w", epoch, topic, p, ctx.Err())
		case <-ch:
		}
	}
}

// BrokerRequest sends an inter-broker request to broker id (mirror.Local).
func (b *Broker) BrokerRequest(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	if id == b.nodeID {
		return nil, errors.New("BrokerRequest: the request is for this broker")
	}
	return b.peers.request(ctx, id, req)
}

// Bounds is the log start offset and LEO of topic/p with the epochs of the batches there
// (mirror.Local): read from the log when this broker leads it, else asked of the
// cluster with ListOffsets.
func (b *Broker) Bounds(ctx context.Context, topic string, p int32) (partition.Bounds, error) {
	if part, err := b.rm.Leader(topic, p); err == nil {
		return part.Bounds(), nil
	}
	adm := kadm.NewClient(b.clusterClient())
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return partition.Bounds{}, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return partition.Bounds{}, err
	}
	s, ok1 := starts.Lookup(topic, p)
	e, ok2 := ends.Lookup(topic, p)
	if !ok1 || !ok2 || s.Err != nil || e.Err != nil {
		return partition.Bounds{}, fmt.Errorf("ListOffsets %s-%d: %v %v", topic, p, s.Err, e.Err)
	}
	return partition.Bounds{LogStart: s.Offset, LogEnd: e.Offset, LogStartEpoch: s.LeaderEpoch, LogEndEpoch: e.LeaderEpoch}, nil
}

// Groups is this cluster's consumer groups for the mirror's group offset sync
// (mirror.Local): this broker's coordinator for the groups it coordinates, the cluster's
// through franz-go for the others; nil without a group coordinator.
func (b *Broker) Groups() group.Access {
	if b.groups == nil {
		return nil
	}
	return groupAccess{b}
}

// clusterClient is a franz-go client of this cluster, bootstrapped at this broker's first
// advertised listener with that listener's client security (the cluster-wide requests
// of the mirror's sync tasks).
func (b *Broker) clusterClient() *kgo.Client {
	b.clusterOnce.Do(func() {
		var sec []kgo.Opt
		var err error
		if len(b.endpoints) > 0 {
			sec, err = b.clientOpts(b.endpoints[0].Name)
		}
		if err != nil {
			b.logger.Error("the mirror's client of this cluster cannot connect", "err", err)
		}
		b.cluster, _ = kgo.NewClient(append(sec, kgo.SeedBrokers(b.Addr()), kgo.ClientID(fmt.Sprintf("kmirror-broker-%d-mirror-sync", b.nodeID)),
			kgo.DialTimeout(5*time.Second))...)
	})
	return b.cluster
}

// groupAccess routes group reads and writes to the group's coordinator (group.Access).
type groupAccess struct{ b *Broker }

// local reports whether this broker coordinates group id (leads its partition of
// __consumer_offsets).
func (g groupAccess) local(id string) bool {
	return g.b.Leads(OffsetsTopic, g.b.groups.PartitionFor(id))
}

func (g groupAccess) GroupState(ctx context.Context, id string) (string, bool, error) {
	if g.local(id) {
		s, ok := g.b.groups.GroupState(id)
		return s, ok, nil
	}
	described, err := kadm.NewClient(g.b.clusterClient()).DescribeGroups(ctx, id)
	if err != nil {
		return "", false, err
	}
	d, ok := described[id]
	if !ok {
		return "Dead", false, nil
	}
	if d.Err != nil {
		return "", false, d.Err
	}
	return d.State, d.State != "Dead", nil
}

func (g groupAccess) CommittedOffsets(ctx context.Context, id string) (map[string]map[int32]group.Offset, error) {
	if g.local(id) {
		return g.b.groups.CommittedOffsets(id), nil
	}
	fetched, err := kadm.NewClient(g.b.clusterClient()).FetchOffsets(ctx, id)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]group.Offset{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			return
		}
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]group.Offset{}
		}
		out[o.Topic][o.Partition] = group.Offset{Offset: o.At, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	})
	return out, nil
}

func (g groupAccess) SyncOffsets(ctx context.Context, id string, offsets map[string]map[int32]group.Offset) error {
	if g.local(id) {
		return g.b.groups.SyncOffsets(id, offsets)
	}
	var os kadm.Offsets
	for topic, parts := range offsets {
		for p, o := range parts {
			os.Add(kadm.Offset{Topic: topic, Partition: p, At: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
		}
	}
	committed, err := kadm.NewClient(g.b.clusterClient()).CommitOffsets(ctx, id, os)
	if err != nil {
		return err
	}
	return committed.Error()
}

// clusterClientState holds the lazily built cluster client (clusterClient).
type clusterClientState struct {
	clusterOnce sync.Once
	cluster     *kgo.Client
}
