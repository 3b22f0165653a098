package broker

// DescribeCluster (Kafka's KafkaApis.handleDescribeCluster): the cluster ID, the
// controller ID for clients and the alive brokers of the request's listener.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.DescribeCluster, 0, 1, (*Broker).handleDescribeCluster) }

func (b *Broker) handleDescribeCluster(ctx context.Context, req *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	resp.ClusterID = b.ClusterID()
	im := b.rm.Image()
	listener := b.listenerOf(ctx)
	resp.ControllerID = b.controllerIDForClients(im, listener)
	resp.ClusterAuthorizedOperations = -2147483648
	if !b.authorizeCluster(ctx, acl.OpDescribe) { // Kafka: DESCRIBE on the cluster
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = b.authorizedOperations(ctx, acl.ResourceCluster, acl.ClusterName)
	}
	for _, br := range b.aliveBrokers(im, listener) {
		e, _ := br.Endpoint(listener)
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port = br.ID, e.Host, e.Port
		if br.Rack != "" {
			db.Rack = strp(br.Rack)
		}
		resp.Brokers = append(resp.Brokers, db)
	}
	return resp
}
