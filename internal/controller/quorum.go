package controller

// DescribeQuorum v0–2 on the active controller (Kafka's KafkaRaftClient / LeaderState
// describeQuorum), which kafka-metadata-quorum asks through any broker.

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
)

// QuorumInfo is what DescribeQuorum reports of the metadata quorum (*metadata.Controller).
type QuorumInfo interface {
	Term() uint64
	LastIndex() uint64
	AppliedIndex() uint64
	Voters() []metadata.Voter
	Observers() []metadata.Voter
}

// metadataTopicName and metadataPartition are the metadata log's name in DescribeQuorum.
const (
	metadataTopicName = "__cluster_metadata"
	metadataPartition = 0
)

// DescribeQuorum answers for the metadata log: the active controller (this node), its
// epoch (the raft term), the high watermark (the last applied offset), and every voter
// and observer with its log end offset — this node's own, and for the others the
// metadata offset their last heartbeat reported, −1 for a controller that sends none —
// and, from v2, the voters' controller listeners. Errors: NOT_CONTROLLER;
// UNKNOWN_TOPIC_OR_PARTITION for another topic than __cluster_metadata.
func (c *Controller) DescribeQuorum(_ context.Context, q QuorumInfo, listener string, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if c.notActive() {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	hw := int64(q.AppliedIndex())
	state := func(v metadata.Voter) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
		s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		s.ReplicaID = v.ID
		s.LogEndOffset = -1
		if v.ID == c.opts.NodeID {
			s.LogEndOffset = int64(q.LastIndex())
			return s
		}
		c.mu.Lock()
		if ss := c.sessions[v.ID]; ss != nil && ss.metadataOffset >= 0 {
			s.LogEndOffset = ss.metadataOffset
			s.LastFetchTimestamp = ss.lastContact.UnixMilli()
			if ss.metadataOffset >= hw {
				s.LastCaughtUpTimestamp = ss.lastContact.UnixMilli()
			}
		}
		c.mu.Unlock()
		return s
	}
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeQuorumResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDescribeQuorumResponseTopicPartition()
			sp.Partition = rp.Partition
			if rt.Topic != metadataTopicName || rp.Partition != metadataPartition {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			sp.LeaderID = c.opts.NodeID
			sp.LeaderEpoch = int32(q.Term())
			sp.HighWatermark = hw
			for _, v := range q.Voters() {
				sp.CurrentVoters = append(sp.CurrentVoters, state(v))
			}
			for _, v := range q.Observers() {
				sp.Observers = append(sp.Observers, state(v))
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Version >= 2 {
		for _, v := range q.Voters() {
			host, port, err := net.SplitHostPort(v.Addr)
			p, _ := strconv.Atoi(port)
			if err != nil {
				continue
			}
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = v.ID
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			l.Name, l.Host, l.Port = listener, host, uint16(p)
			n.Listeners = append(n.Listeners, l)
			resp.Nodes = append(resp.Nodes, n)
		}
	}
	return resp
}
