package broker

// WriteTxnMarkers (inter-broker): the transaction markers a transaction coordinator on
// another broker sends (txn.go's sendMarker), written to the partitions this broker leads.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/txn"
)

func init() { register(kmsg.WriteTxnMarkers, 0, 1, (*Broker).handleWriteTxnMarkers) }

// handleWriteTxnMarkers writes the markers a transaction coordinator on another broker
// sends (inter-broker): per partition NOT_LEADER_OR_FOLLOWER when this broker does not
// lead it, UNKNOWN_TOPIC_OR_PARTITION when it is gone or read-only.
func (b *Broker) handleWriteTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	denied := !b.authorizeCluster(ctx, acl.OpClusterAction) // Kafka: CLUSTER_ACTION on the cluster
	for _, wm := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = wm.ProducerID
		for _, wt := range wm.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = wt.Topic
			for _, p := range wt.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				if denied {
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
					continue
				}
				m := txn.Marker{ProducerID: wm.ProducerID, ProducerEpoch: wm.ProducerEpoch, CoordinatorEpoch: wm.CoordinatorEpoch,
					Commit: wm.Committed, Partition: kafka.TopicPartition{Topic: wt.Topic, Partition: p}}
				if _, err := b.leader(wt.Topic, p); err != nil {
					rp.ErrorCode = partitionError(err).Code
				} else if err := b.appendMarker(m); errors.Is(err, txn.ErrPartitionGone) {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				} else if err != nil {
					rp.ErrorCode = appendErrorCode(err).Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}
