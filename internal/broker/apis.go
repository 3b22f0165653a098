package broker

// The registry of served APIs, in franz-go kfake's style with the handler next to the
// range: each API's file (named for the API: produce.go, joingroup.go, ...) registers in
// an init function the versions it serves and its handler, on the broker listeners
// (register) or the controller listener (registerController). That registration is the
// one place an API's versions are written: the listeners' version tables (ApiVersions)
// and their dispatch (Broker.Handle, controllerHandler) are built from it. A registration
// the request types contradict (another key's request type, a maximum above the version
// kmsg or mirrorproto encodes) panics at start.
//
// kmsg knows only maximum versions, so minimums follow Apache Kafka 4.x (which removed the
// oldest versions), kept low enough for the Java, librdkafka and franz-go clients of the
// last five years. APIs not registered (SASL, KIP-848, share groups) are not advertised,
// so clients fall back or report them as unsupported.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/wire"
)

// handler answers one decoded request; nil is no response (Produce with acks=0).
type handler func(b *Broker, ctx context.Context, req *wire.Request) kmsg.Response

// api is one registered API of a listener.
type api struct {
	versions wire.VersionRange
	handle   handler // nil for ApiVersions, which internal/wire answers itself
	// servedIf, when set, serves (and advertises) the API only on a broker for which it
	// reports true; the mirror RPCs are served only with mirroring.
	servedIf func(b *Broker) bool
}

// apiTable is the registry of one kind of listener, by API key.
type apiTable map[int16]*api

var (
	brokerAPIs     = apiTable{} // the broker listeners (listeners other than the controller's)
	controllerAPIs = apiTable{} // the controller listener (controller.listener.names)
)

// add registers key at versions min..max with h; it panics on a key registered twice, a
// key newRequest does not know, or a range that is empty or above the request type's
// MaxVersion.
func (t apiTable) add(key kmsg.Key, min, max int16, h handler) *api {
	k := key.Int16()
	name := apiName(k)
	req := newRequest(k)
	switch {
	case t[k] != nil:
		panic(fmt.Sprintf("broker: %s (key %d) registered twice", name, k))
	case req == nil:
		panic(fmt.Sprintf("broker: key %d registered without a request type", k))
	case min < 0 || min > max || max > req.MaxVersion():
		panic(fmt.Sprintf("broker: %s registered at versions %d–%d; its request type encodes 0–%d", name, min, max, req.MaxVersion()))
	}
	a := &api{versions: wire.VersionRange{Min: min, Max: max}, handle: h}
	t[k] = a
	return a
}

// register serves key on the broker listeners at versions min..max with h, whose
// parameter is key's request type (checked here: a mismatch panics).
func register[Req kmsg.Request](key kmsg.Key, min, max int16, h func(*Broker, context.Context, Req) kmsg.Response) *api {
	return brokerAPIs.add(key, min, max, typed(key, h))
}

// registerController is register for the controller listener.
func registerController[Req kmsg.Request](key kmsg.Key, min, max int16, h func(*Broker, context.Context, Req) kmsg.Response) *api {
	return controllerAPIs.add(key, min, max, typed(key, h))
}

// typed adapts a handler of key's request type to a handler.
func typed[Req kmsg.Request](key kmsg.Key, h func(*Broker, context.Context, Req) kmsg.Response) handler {
	if _, ok := newRequest(key.Int16()).(Req); !ok {
		panic(fmt.Sprintf("broker: %s (key %d) registered with a handler of %T", apiName(key.Int16()), key, *new(Req)))
	}
	return func(b *Broker, ctx context.Context, req *wire.Request) kmsg.Response {
		return h(b, ctx, req.Body.(Req))
	}
}

// served reports whether a is served on b.
func (a *api) served(b *Broker) bool { return a.servedIf == nil || a.servedIf(b) }

// versions is the version table of the listeners t serves on b.
func (t apiTable) versions(b *Broker) *wire.Versions {
	ranges := map[int16]wire.VersionRange{}
	for k, a := range t {
		if a.served(b) {
			ranges[k] = a.versions
		}
	}
	return wire.NewVersions(ranges)
}

// handle dispatches req to its handler.
func (t apiTable) handle(b *Broker, ctx context.Context, req *wire.Request) kmsg.Response {
	if a := t[req.Header.Key]; a != nil && a.handle != nil && a.served(b) {
		return a.handle(b, b.withSession(ctx, req), req)
	}
	// The version table lists only served keys with a handler (wire refuses the others);
	// reaching here is a bug.
	b.logger.Error("no handler", "key", req.Header.Key)
	return nil
}

// apiName is the name of key for messages: Kafka's, else the request type's.
func apiName(key int16) string {
	if kmsg.RequestForKey(key) != nil {
		return kmsg.NameForKey(key)
	}
	return fmt.Sprintf("%T", newRequest(key))
}
