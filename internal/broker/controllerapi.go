package broker

// The controller listener (controller.listener.names): the Kafka-protocol RPCs of the
// metadata quorum's controllers — BrokerRegistration v0–4, BrokerHeartbeat v0–1,
// AllocateProducerIds v0, DescribeQuorum v0–2, kmirror's ApplyRecords and BumpLeaderEpochs
// (the mirror's leader-epoch raises, spec section 6) — answered by
// this node's controller, NOT_CONTROLLER unless it is the active one. The same port
// carries the quorum's raft streams (netmux).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/controller"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/wire"
)

// controllerVersions is the version table of the controller listener.
func controllerVersions() *wire.Versions {
	return wire.NewVersions(map[int16]wire.VersionRange{
		kmsg.ApiVersions.Int16():                                             {Min: 0, Max: 4},
		kmsg.BrokerRegistration.Int16():                                      {Min: 0, Max: 4},
		kmsg.BrokerHeartbeat.Int16():                                         {Min: 0, Max: 1},
		kmsg.AllocateProducerIDs.Int16():                                     {Min: 0, Max: 0},
		kmsg.DescribeQuorum.Int16():                                          {Min: 0, Max: 2},
		controller.ApplyRecordsKey:                                           {Min: 0, Max: 0},
		mirrorproto.ServedKey(mirrorproto.PrototypeKeys["BumpLeaderEpochs"]): {Min: 0, Max: 0},
	})
}

// controllerHandler serves the controller listener.
type controllerHandler struct{ b *Broker }

func (h controllerHandler) Handle(ctx context.Context, req *wire.Request) kmsg.Response {
	if r, ok := req.Body.(*kmsg.DescribeQuorumRequest); ok {
		return h.b.ctrl.DescribeQuorum(ctx, h.b.meta, h.b.ctrlLn.cfg.Name, r)
	}
	return h.b.ctrl.Handle(ctx, req.Body)
}
