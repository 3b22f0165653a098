package broker

// The controller listener (controller.listener.names): the Kafka-protocol RPCs of the
// metadata quorum's controllers — BrokerRegistration, BrokerHeartbeat,
// AllocateProducerIds, AlterPartition (v2–3, as Kafka 4.x: the partition leaders' ISR
// changes), ElectLeaders (electleaders.go forwards the broker listeners' to it),
// DescribeQuorum (describequorum.go), kmirror's ApplyRecords and
// BumpLeaderEpochs (the mirror's leader-epoch raises, spec section 6) — answered by
// this node's controller, NOT_CONTROLLER unless it is the active one. The same port
// carries the quorum's raft streams (netmux).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/controller"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/wire"
)

func init() {
	registerController(kmsg.BrokerRegistration, 0, 4, byController((*controller.Controller).RegisterBroker))
	registerController(kmsg.BrokerHeartbeat, 0, 1, byController((*controller.Controller).Heartbeat))
	registerController(kmsg.AllocateProducerIDs, 0, 0, byController((*controller.Controller).AllocateProducerIDs))
	registerController(kmsg.AlterPartition, 2, 3, byController((*controller.Controller).AlterPartition))
	registerController(kmsg.ElectLeaders, 0, 2, byController((*controller.Controller).ElectLeaders))
	registerController(kmsg.Key(controller.ApplyRecordsKey), 0, 0, byController((*controller.Controller).ApplyRecords))
	registerController(kmsg.Key(mirrorproto.ServedKey(mirrorproto.PrototypeKeys["BumpLeaderEpochs"])), 0, 0,
		byController((*controller.Controller).BumpLeaderEpochs))
}

// byController adapts a handler of the controller to a handler of the broker's; the
// request needs CLUSTER_ACTION on the cluster (Kafka's ControllerApis: the controller
// RPCs are inter-node), else CLUSTER_AUTHORIZATION_FAILED.
func byController[Req kmsg.Request, Resp kmsg.Response](m func(*controller.Controller, context.Context, Req) Resp) func(*Broker, context.Context, Req) kmsg.Response {
	return clusterGated(acl.OpClusterAction, func(b *Broker, ctx context.Context, req Req) kmsg.Response { return m(b.ctrl, ctx, req) })
}

// controllerHandler serves the controller listener.
type controllerHandler struct{ b *Broker }

func (h controllerHandler) Handle(ctx context.Context, req *wire.Request) kmsg.Response {
	return controllerAPIs.handle(h.b, ctx, req)
}
