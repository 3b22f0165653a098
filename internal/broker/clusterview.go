package broker

// What the APIs that describe the cluster (Metadata, DescribeCluster,
// DescribeTopicPartitions) say of its brokers, its controller and a partition, from the
// applied image.

import (
	"github.com/kmirror/kmirror/internal/metadata"
)

// aliveBrokers are the brokers clients of listener may talk to: registered, unfenced and
// with an endpoint on that listener, by ID (as Kafka's
// KRaftMetadataCache.getAliveBrokerNodes, which leaves fenced brokers out).
func (b *Broker) aliveBrokers(im *metadata.Image, listener string) []*metadata.BrokerRegistration {
	var out []*metadata.BrokerRegistration
	for _, id := range im.BrokerIDs() {
		if br := im.Brokers[id]; !br.Fenced {
			if _, ok := br.Endpoint(listener); ok {
				out = append(out, br)
			}
		}
	}
	return out
}

// controllerIDForClients is the ControllerID of Metadata and DescribeCluster for
// clients: KRaft controllers are not reachable on client listeners, so Kafka answers an
// alive broker; kmirror answers the active controller's node when it is an alive broker,
// else the lowest alive broker ID (−1 when none).
func (b *Broker) controllerIDForClients(im *metadata.Image, listener string) int32 {
	alive := b.aliveBrokers(im, listener)
	if id, ok := b.activeControllerID(); ok {
		for _, br := range alive {
			if br.ID == id {
				return id
			}
		}
	}
	if len(alive) > 0 {
		return alive[0].ID
	}
	return -1
}

// activeControllerID is the node ID of the active controller, false when unknown.
func (b *Broker) activeControllerID() (int32, bool) {
	if b.ActiveController() {
		return b.nodeID, true
	}
	if id, _, ok := b.meta.Leader(); ok {
		return id, true
	}
	return -1, false
}

// partitionView is what Metadata and DescribeTopicPartitions say of a partition: its
// leader, leader epoch (this broker's own when it leads it), replicas, ISR and the
// replicas on brokers that are fenced or not registered.
func (b *Broker) partitionView(im *metadata.Image, t *metadata.Topic, p int32) (leader, epoch int32, replicas, isr, offline []int32) {
	reg := t.Partition(p)
	leader, epoch = reg.Leader, reg.LeaderEpoch
	if part := b.rm.Get(t.Name, p); part != nil && part.IsLeader() {
		epoch = part.LeaderEpoch()
	}
	replicas, isr = append([]int32{}, reg.Replicas...), append([]int32{}, reg.ISR...)
	for _, r := range reg.Replicas {
		if br, ok := im.Brokers[r]; !ok || br.Fenced {
			offline = append(offline, r)
		}
	}
	return leader, epoch, replicas, isr, offline
}
