package broker

// The cluster mirroring RPCs (internal/mirrorproto, spec section 10), served by the mirror
// manager of internal/mirror when mirroring is on.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// handleMirrorRPC serves the cluster mirroring RPCs of spec section 10, or returns nil
// for another request; BumpLeaderEpochs is the controllers' (controllerapi.go).
func (b *Broker) handleMirrorRPC(ctx context.Context, req kmsg.Request) kmsg.Response {
	m := b.mirrors
	if m == nil {
		return nil
	}
	switch r := req.(type) {
	case *mirrorproto.CreateClusterMirrorRequest:
		return m.CreateClusterMirror(ctx, r)
	case *mirrorproto.StartMirrorTopicsRequest:
		return m.StartMirrorTopics(ctx, r)
	case *mirrorproto.StopMirrorTopicsRequest:
		return m.StopMirrorTopics(ctx, r)
	case *mirrorproto.ListClusterMirrorsRequest:
		return m.ListClusterMirrors(ctx, r)
	case *mirrorproto.DescribeClusterMirrorsRequest:
		return m.DescribeClusterMirrors(ctx, r)
	case *mirrorproto.PauseMirrorTopicsRequest:
		return m.PauseMirrorTopics(ctx, r)
	case *mirrorproto.ResumeMirrorTopicsRequest:
		return m.ResumeMirrorTopics(ctx, r)
	case *mirrorproto.DeleteClusterMirrorRequest:
		return m.DeleteClusterMirror(ctx, r)
	case *mirrorproto.RecoverMirrorTopicsRequest:
		return m.RecoverMirrorTopics(ctx, r)
	case *mirrorproto.ReadMirrorStatesRequest:
		return m.ReadMirrorStates(ctx, r)
	case *mirrorproto.WriteMirrorStatesRequest:
		return m.WriteMirrorStates(ctx, r)
	}
	return nil
}
