package broker

// ElectLeaders (kafka-leader-election --election-type preferred|unclean): on the broker
// listeners it is forwarded to the active controller (internal/controller), as Kafka's
// brokers forward it; the controller listener serves it directly (controllerapis.go).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/controller"
)

func init() { register(kmsg.ElectLeaders, 0, 2, (*Broker).handleElectLeaders) }

// handleElectLeaders asks the active controller — this node's, when it is active — and
// answers what it answered, retrying NOT_CONTROLLER within the request's TimeoutMillis
// (Kafka's default 60 s when unset). Unreachable controllers are REQUEST_TIMED_OUT or
// NOT_CONTROLLER, at the top (v1+) and on every named partition.
func (b *Broker) handleElectLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) kmsg.Response {
	if !b.authorizeCluster(ctx, acl.OpAlter) { // Kafka: ALTER on the cluster
		return refuse(req.ResponseKind(), kerr.ClusterAuthorizationFailed)
	}
	if b.ctrl != nil && b.ctrl.Active() {
		return b.ctrl.ElectLeaders(ctx, req)
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := retryNotController(ctx, func(ctx context.Context) (kmsg.Response, error) {
		resp, err := b.channel.Request(ctx, req)
		if err == nil && resp.(*kmsg.ElectLeadersResponse).ErrorCode == kerr.NotController.Code {
			return resp, kerr.NotController
		}
		return resp, err
	})
	if err != nil {
		return controller.ElectLeadersError(req, kerr.TypedErrorForCode(errorCodeOfErr(err)), err.Error())
	}
	resp.SetVersion(req.Version)
	return resp
}
