package broker

// Replication on this broker: the replica manager's settings (min.insync.replicas,
// replica.lag.time.max.ms, AlterPartition to the controller) and the replica fetchers of
// the partitions it follows (internal/replication), fed by the replica manager's role
// changes. See docs/replication.md.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/partition"
	"github.com/kmirror/kmirror/internal/replication"
)

// replicaOptions are the replica manager's replication settings.
func (b *Broker) replicaOptions(o partition.Options) partition.Options {
	o.MinInsyncReplicas = func(t *metadata.Topic) int32 { return int32(b.topicInt(t, "min.insync.replicas")) }
	o.ReplicaLagTimeMaxMs = b.cfg.Int64("replica.lag.time.max.ms")
	o.AlterPartition = b.alterPartition
	o.BrokerEpoch = b.life.BrokerEpoch
	return o
}

// alterPartition sends an ISR change to the active controller.
func (b *Broker) alterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error) {
	if b.channel == nil {
		return nil, fmt.Errorf("the controller channel is not open yet")
	}
	resp, err := b.channel.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.AlterPartitionResponse), nil
}

// newFetchers returns the replica fetchers, with Kafka's replica.fetch.* settings.
func (b *Broker) newFetchers() *replication.Manager {
	return replication.NewManager(replication.Options{
		NodeID:            b.nodeID,
		BrokerEpoch:       b.life.BrokerEpoch,
		Dial:              b.dialReplicaFetcher,
		NumFetchers:       int(b.cfg.Int32("num.replica.fetchers")),
		MaxWaitMs:         b.cfg.Int32("replica.fetch.wait.max.ms"),
		MinBytes:          b.cfg.Int32("replica.fetch.min.bytes"),
		MaxBytes:          b.cfg.Int32("replica.fetch.response.max.bytes"),
		PartitionMaxBytes: b.cfg.Int32("replica.fetch.max.bytes"),
		Backoff:           time.Duration(b.cfg.Int64("replica.fetch.backoff.ms")) * time.Millisecond,
		Logger:            b.logger,
	})
}

// dialReplicaFetcher returns a new client to broker id's inter-broker endpoint for one
// replica fetcher (its own connection: a fetch long-polls replica.fetch.wait.max.ms).
func (b *Broker) dialReplicaFetcher(id int32) (*kgo.Client, error) {
	addr, err := b.interBrokerAddr(id)
	if err != nil {
		return nil, err
	}
	sec, err := b.clientOpts(b.interBrokerListener())
	if err != nil {
		return nil, err
	}
	return kgo.NewClient(append(sec, kgo.SeedBrokers(addr),
		kgo.ClientID(fmt.Sprintf("kmirror-replica-fetcher-%d", b.nodeID)),
		kgo.DialTimeout(5*time.Second), kgo.RequestRetries(0), kgo.MaxVersions(interBrokerVersions()))...)
}

// followChanges hands the partitions that started or stopped following a leader to the
// replica fetchers.
func (b *Broker) followChanges(ch partition.Change) {
	if b.fetchers == nil {
		return
	}
	b.fetchers.Unfollow(ch.Unfollowed...)
	b.fetchers.Follow(ch.Followers...)
}
