package broker

// DescribeQuorum (KIP-595; kafka-metadata-quorum): the metadata quorum's voters and
// observers, answered by the active controller (internal/controller) on the controller
// listener and, forwarded to it, on the broker listeners.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() {
	const lo, hi = 0, 2
	// Kafka: DESCRIBE on the cluster.
	register(kmsg.DescribeQuorum, lo, hi, clusterGated(acl.OpDescribe, (*Broker).handleDescribeQuorum))
	registerController(kmsg.DescribeQuorum, lo, hi, clusterGated(acl.OpDescribe, (*Broker).handleControllerDescribeQuorum))
}

// handleControllerDescribeQuorum answers DescribeQuorum on the controller listener.
func (b *Broker) handleControllerDescribeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) kmsg.Response {
	return b.ctrl.DescribeQuorum(ctx, b.meta, b.ctrlLn.cfg.Name, req)
}

// handleDescribeQuorum answers DescribeQuorum on a broker listener by asking the active
// controller, as Kafka's brokers forward it (kafka-metadata-quorum --bootstrap-server).
func (b *Broker) handleDescribeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) kmsg.Response {
	if b.ctrl != nil && b.ctrl.Active() {
		name := b.clientListener()
		if b.ctrlLn != nil {
			name = b.ctrlLn.cfg.Name
		}
		return b.ctrl.DescribeQuorum(ctx, b.meta, name, req)
	}
	resp, err := b.channel.Request(ctx, req)
	if err != nil {
		r := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
		r.ErrorCode = errorCodeOfErr(err)
		return r
	}
	resp.SetVersion(req.Version)
	return resp
}
