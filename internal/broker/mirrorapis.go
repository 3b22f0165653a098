package broker

// The cluster mirroring RPCs (internal/mirrorproto, spec section 10), served by the mirror
// manager of internal/mirror when mirroring is on, at the versions their request types
// encode (v0). BumpLeaderEpochs is the controllers' (controllerapis.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	mirrorRPC(Mirrors.CreateClusterMirror)
	mirrorRPC(Mirrors.StartMirrorTopics)
	mirrorRPC(Mirrors.StopMirrorTopics)
	mirrorRPC(Mirrors.ListClusterMirrors)
	mirrorRPC(Mirrors.DescribeClusterMirrors)
	mirrorRPC(Mirrors.PauseMirrorTopics)
	mirrorRPC(Mirrors.ResumeMirrorTopics)
	mirrorRPC(Mirrors.DeleteClusterMirror)
	mirrorRPC(Mirrors.RecoverMirrorTopics)
	// Inter-broker: the states of the __mirror_state partitions this broker coordinates.
	mirrorRPC(Mirrors.ReadMirrorStates)
	mirrorRPC(Mirrors.WriteMirrorStates)
}

// mirrorRPC registers the mirror RPC of m's request type on the broker listeners, served
// by the mirror manager with m when mirroring is on.
func mirrorRPC[E any, Req interface {
	*E
	kmsg.Request
}, Resp kmsg.Response](m func(Mirrors, context.Context, Req) Resp) {
	req := Req(new(E))
	a := register(kmsg.Key(req.Key()), 0, req.MaxVersion(), func(b *Broker, ctx context.Context, req Req) kmsg.Response {
		if b.mirrors == nil {
			return nil
		}
		refusal, served, denied := b.authorizeMirrorRPC(ctx, req)
		if refusal != nil {
			return refusal
		}
		resp := kmsg.Response(m(b.mirrors, ctx, served.(Req)))
		b.filterMirrorAnswer(ctx, req, resp, denied)
		return resp
	})
	a.servedIf = mirroring
}

// mirroring reports whether b runs the cluster mirroring service.
func mirroring(b *Broker) bool { return b.newMirrors != nil }
