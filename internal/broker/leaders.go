package broker

// How a request for a partition this broker does not lead is answered: the Kafka error,
// and (KIP-951) the current leader and its endpoint, so that a client moves without a
// metadata round trip.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/partition"
	"github.com/kmirror/kmirror/internal/storage"
)

// partitionError maps a partition lookup, leader check or write error to its Kafka error.
func partitionError(err error) *kerr.Error {
	switch {
	case errors.Is(err, partition.ErrUnknownTopicOrPartition), errors.Is(err, storage.ErrClosed):
		return kerr.UnknownTopicOrPartition
	case errors.Is(err, partition.ErrNotLeader), errors.Is(err, partition.ErrNotReplica), errors.Is(err, partition.ErrStaleBrokerEpoch):
		return kerr.NotLeaderForPartition
	case errors.Is(err, partition.ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas
	case errors.Is(err, partition.ErrNotEnoughReplicasAfterAppend):
		return kerr.NotEnoughReplicasAfterAppend
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut
	case errors.Is(err, partition.ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch
	case errors.Is(err, partition.ErrUnknownLeaderEpoch):
		return kerr.UnknownLeaderEpoch
	}
	return nil
}

// currentLeader is the leader and leader epoch of topic/p in the applied image (KIP-951
// CurrentLeader), (−1, −1) when it has none or the partition is unknown.
func (b *Broker) currentLeader(topic string, p int32) (int32, int32) {
	t := b.rm.Image().Topics[topic]
	if t == nil || t.Partition(p) == nil || t.Partition(p).Leader == metadata.NoLeader {
		return -1, -1
	}
	reg := t.Partition(p)
	return reg.Leader, reg.LeaderEpoch
}

// endpointOf is broker id's endpoint on the listener named listener, false when it is not
// registered or has no such endpoint.
func (b *Broker) endpointOf(im *metadata.Image, id int32, listener string) (metadata.Endpoint, bool) {
	br, ok := im.Brokers[id]
	if !ok {
		return metadata.Endpoint{}, false
	}
	return br.Endpoint(listener)
}

// clientListener names the first broker listener, the one of requests whose listener is
// not known.
func (b *Broker) clientListener() string {
	if len(b.endpoints) == 0 {
		return ""
	}
	return b.endpoints[0].Name
}
