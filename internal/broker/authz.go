package broker

// Authorization (docs/authorization.md): the authorizer of authorizer.class.name over the
// ACL bindings of the metadata image, the request's principal and host, and the checks
// the handlers make, following Apache Kafka's AuthHelper and KafkaApis.

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/wire"
)

// StandardAuthorizer is the one authorizer.class.name kmirror serves.
const StandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// authorization is the broker's authorizer and the image bindings it was loaded from.
type authorization struct {
	authz *acl.Authorizer // nil: authorization off
	mu    sync.Mutex      // serialises reloads
	// aclWriteMu serialises this broker's CreateAcls and DeleteAcls (their check of the
	// image and their write).
	aclWriteMu sync.Mutex
	// loaded is the image's ACL map last loaded (stored under mu). Holding it keeps the
	// map alive, so a new map never reuses its address and identity comparison is sound.
	loaded atomic.Pointer[map[metadata.TopicID]*metadata.AccessControlEntryRecord]
}

// newAuthorizer reads authorizer.class.name, super.users and allow.everyone.if.no.acl.found;
// nil with authorization off.
func newAuthorizer(cfg *config.Values) (*acl.Authorizer, error) {
	switch name := strings.TrimSpace(cfg.String("authorizer.class.name")); name {
	case "":
		return nil, nil
	case StandardAuthorizer:
		return acl.New(acl.ParseSuperUsers(cfg.String("super.users")), cfg.Bool("allow.everyone.if.no.acl.found")), nil
	default:
		return nil, fmt.Errorf("authorizer.class.name: %q is not supported; kmirror serves only %s (or empty, no authorization)", name, StandardAuthorizer)
	}
}

// authorizer returns the authorizer with the bindings of the current image (nil with
// authorization off). A reload happens only when the image's ACL map changed.
func (b *Broker) authorizer() *acl.Authorizer {
	a := &b.authorization
	if a.authz == nil {
		return nil
	}
	acls := b.meta.Image().ACLs
	if sameMap(a.loaded.Load(), acls) {
		return a.authz // the common case: no lock
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !sameMap(a.loaded.Load(), acls) {
		a.authz.Load(bindingsOf(acls))
		a.loaded.Store(&acls)
	}
	return a.authz
}

// sameMap reports whether loaded points to the map m (the same map, not equal contents).
func sameMap(loaded *map[metadata.TopicID]*metadata.AccessControlEntryRecord, m map[metadata.TopicID]*metadata.AccessControlEntryRecord) bool {
	return loaded != nil && reflect.ValueOf(*loaded).UnsafePointer() == reflect.ValueOf(m).UnsafePointer()
}

// bindingsOf converts the image's ACL records.
func bindingsOf(m map[metadata.TopicID]*metadata.AccessControlEntryRecord) []acl.Binding {
	out := make([]acl.Binding, 0, len(m))
	for _, r := range m {
		out = append(out, bindingOf(r))
	}
	return out
}

func bindingOf(r *metadata.AccessControlEntryRecord) acl.Binding {
	return acl.Binding{
		ResourceType: acl.ResourceType(r.ResourceType), ResourceName: r.ResourceName, PatternType: acl.PatternType(r.PatternType),
		Principal: r.Principal, Host: r.Host, Operation: acl.Operation(r.Operation), Permission: acl.Permission(r.PermissionType),
	}
}

// session is the principal and client host of the request a handler serves.
type session struct{ principal, host string }

type sessionKey struct{}

// withSession stores req's principal and host in ctx for the handler's checks (only with
// authorization on: without it nothing reads them).
func (b *Broker) withSession(ctx context.Context, req *wire.Request) context.Context {
	if b.authorization.authz == nil {
		return ctx
	}
	s := session{principal: req.Principal}
	if s.principal == "" {
		s.principal = wire.AnonymousPrincipal
	}
	if a, ok := req.Remote.(*net.TCPAddr); ok {
		s.host = a.IP.String()
	} else if req.Remote != nil {
		s.host, _, _ = net.SplitHostPort(req.Remote.String())
	}
	return context.WithValue(ctx, sessionKey{}, s)
}

// authorize reports whether ctx's request may perform op on the resource rt/name. A
// request without a session (the broker's own in-process calls) is allowed, as is every
// request with authorization off.
func (b *Broker) authorize(ctx context.Context, op acl.Operation, rt acl.ResourceType, name string) bool {
	a := b.authorizer()
	if a == nil {
		return true
	}
	s, ok := ctx.Value(sessionKey{}).(session)
	if !ok {
		return true
	}
	return a.Authorize(s.principal, s.host, op, rt, name)
}

// authorizeCluster is authorize on the CLUSTER resource.
func (b *Broker) authorizeCluster(ctx context.Context, op acl.Operation) bool {
	return b.authorize(ctx, op, acl.ResourceCluster, acl.ClusterName)
}

// authorizeByResourceType is acl.Authorizer.AuthorizeByResourceType for ctx's request.
func (b *Broker) authorizeByResourceType(ctx context.Context, op acl.Operation, rt acl.ResourceType) bool {
	a := b.authorizer()
	if a == nil {
		return true
	}
	s, ok := ctx.Value(sessionKey{}).(session)
	if !ok {
		return true
	}
	return a.AuthorizeByResourceType(s.principal, s.host, op, rt)
}

// authorizedOperations is the authorized-operations bit field of rt/name for ctx's
// request (every supported operation with authorization off).
func (b *Broker) authorizedOperations(ctx context.Context, rt acl.ResourceType, name string) int32 {
	a := b.authorizer()
	s, ok := ctx.Value(sessionKey{}).(session)
	if a == nil || !ok {
		return (*acl.Authorizer)(nil).AuthorizedOperations("", "", rt, name)
	}
	return a.AuthorizedOperations(s.principal, s.host, rt, name)
}

// refuse sets the top-level ErrorCode of resp, a kmsg response struct that has one, to e
// and returns resp: the whole-request refusals (GROUP_AUTHORIZATION_FAILED on JoinGroup,
// CLUSTER_AUTHORIZATION_FAILED on DescribeCluster, ...).
func refuse(resp kmsg.Response, e *kerr.Error) kmsg.Response {
	f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 {
		panic(fmt.Sprintf("broker: refuse: %T has no ErrorCode", resp))
	}
	f.SetInt(int64(e.Code))
	return resp
}

// gated wraps h so that a request ctx may not perform op on the resource that resource
// names is refused with e (refuse) without reaching h.
func gated[Req kmsg.Request](op acl.Operation, rt acl.ResourceType, resource func(Req) string, e *kerr.Error,
	h func(*Broker, context.Context, Req) kmsg.Response) func(*Broker, context.Context, Req) kmsg.Response {
	return func(b *Broker, ctx context.Context, req Req) kmsg.Response {
		if !b.authorize(ctx, op, rt, resource(req)) {
			return refuse(req.ResponseKind(), e)
		}
		return h(b, ctx, req)
	}
}

// clusterGated wraps h so that a request without op on the cluster is refused with
// CLUSTER_AUTHORIZATION_FAILED.
func clusterGated[Req kmsg.Request](op acl.Operation, h func(*Broker, context.Context, Req) kmsg.Response) func(*Broker, context.Context, Req) kmsg.Response {
	return gated(op, acl.ResourceCluster, func(Req) string { return acl.ClusterName }, kerr.ClusterAuthorizationFailed, h)
}

// groupReadGated wraps a handler of a one-group request that needs READ on the group
// (Kafka's handleSyncGroupRequest, handleHeartbeatRequest, handleLeaveGroupRequest):
// GROUP_AUTHORIZATION_FAILED without it.
func groupReadGated[Req kmsg.Request](h func(*Broker, context.Context, Req) kmsg.Response) func(*Broker, context.Context, Req) kmsg.Response {
	return gated(acl.OpRead, acl.ResourceGroup, func(r Req) string { return groupOf(r) }, kerr.GroupAuthorizationFailed, h)
}

// groupOf is the group a one-group request names.
func groupOf(r kmsg.Request) string {
	switch r := r.(type) {
	case *kmsg.JoinGroupRequest:
		return r.Group
	case *kmsg.SyncGroupRequest:
		return r.Group
	case *kmsg.HeartbeatRequest:
		return r.Group
	case *kmsg.LeaveGroupRequest:
		return r.Group
	}
	panic(fmt.Sprintf("broker: groupOf %T", r))
}

// authorizeConfigResource checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
// resource as Kafka's ConfigAdminManager and AuthHelper do: a topic on the TOPIC resource
// (TOPIC_AUTHORIZATION_FAILED), the broker on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED),
// a cluster mirror on its ClusterMirror resource (CLUSTER_AUTHORIZATION_FAILED with a
// message naming CLUSTER_MIRROR_AUTHORIZATION_FAILED: standard config RPCs carry only
// standard codes, spec section 10). Nil when allowed or for another resource type.
func (b *Broker) authorizeConfigResource(ctx context.Context, op acl.Operation, rt int8, name string) (*kerr.Error, string) {
	switch rt {
	case resourceTopic:
		if !b.authorize(ctx, op, acl.ResourceTopic, name) {
			return kerr.TopicAuthorizationFailed, "Authorization failed."
		}
	case resourceBroker:
		if !b.authorizeCluster(ctx, op) {
			return kerr.ClusterAuthorizationFailed, "Authorization failed."
		}
	case mirrorproto.ConfigResourceTypeClusterMirror:
		if !b.authorize(ctx, op, acl.ResourceClusterMirror, name) {
			return kerr.ClusterAuthorizationFailed, "CLUSTER_MIRROR_AUTHORIZATION_FAILED: " + op.String() + " on cluster mirror " + name + " is not authorized"
		}
	}
	return nil, ""
}

// setErrorMessage sets the top-level ErrorMessage of resp when it has one.
func setErrorMessage(resp kmsg.Response, msg string) {
	if f := reflect.ValueOf(resp).Elem().FieldByName("ErrorMessage"); f.IsValid() && f.Type() == reflect.TypeOf((*string)(nil)) {
		f.Set(reflect.ValueOf(&msg))
	}
}
