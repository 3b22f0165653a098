package acl

import (
	"strings"
	"sync/atomic"
)

// Authorizer answers whether a principal from a host may perform an operation on a
// resource, with the semantics of Kafka's StandardAuthorizer (StandardAuthorizerData):
//
//   - a super user (super.users) may do everything;
//   - the bindings that apply to a resource are the LITERAL ones of its name, the LITERAL
//     "*" ones of its type and the PREFIXED ones whose prefix its name starts with; of
//     those, the ones whose principal is the caller's or "User:*" and whose host is the
//     caller's or "*" decide;
//   - a DENY for the operation (or ALL) wins over every ALLOW;
//   - an ALLOW for the operation, for ALL, or for an operation that implies it (READ,
//     WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS)
//     allows;
//   - a resource no binding applies to (whatever its principal) is allowed only with
//     allow.everyone.if.no.acl.found.
//
// A nil *Authorizer is authorization switched off (no authorizer.class.name): every
// check is allowed. Safe for concurrent use; Load replaces the bindings atomically.
type Authorizer struct {
	superUsers    map[string]bool
	allowEveryone bool
	idx           atomic.Pointer[index]
}

// New returns an authorizer with super users (principals "User:NAME") and
// allow.everyone.if.no.acl.found, and no bindings.
func New(superUsers []string, allowEveryoneIfNoACLFound bool) *Authorizer {
	a := &Authorizer{superUsers: map[string]bool{}, allowEveryone: allowEveryoneIfNoACLFound}
	for _, u := range superUsers {
		if u = strings.TrimSpace(u); u != "" {
			a.superUsers[u] = true
		}
	}
	a.idx.Store(buildIndex(nil))
	return a
}

// ParseSuperUsers splits super.users (semicolon-separated principals, as Kafka's
// StandardAuthorizer.getConfiguredSuperUsers).
func ParseSuperUsers(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Load replaces the bindings with bs (the metadata image's).
func (a *Authorizer) Load(bs []Binding) { a.idx.Store(buildIndex(bs)) }

// key is a resource type and name (a LITERAL name or a PREFIXED prefix).
type key struct {
	rt   ResourceType
	name string
}

// entry is the access control entry of one binding.
type entry struct {
	principal, host string
	op              Operation
	perm            Permission
}

// index holds the bindings by resource for the lookups of Authorize.
type index struct {
	literal     map[key][]entry
	prefixed    map[key][]entry
	hasPrefixed map[ResourceType]bool
	byType      map[ResourceType][]Binding // for AuthorizeByResourceType
}

func buildIndex(bs []Binding) *index {
	x := &index{literal: map[key][]entry{}, prefixed: map[key][]entry{}, hasPrefixed: map[ResourceType]bool{}, byType: map[ResourceType][]Binding{}}
	for _, b := range bs {
		e := entry{principal: b.Principal, host: b.Host, op: b.Operation, perm: b.Permission}
		k := key{b.ResourceType, b.ResourceName}
		if b.PatternType == PatternPrefixed {
			x.prefixed[k] = append(x.prefixed[k], e)
			x.hasPrefixed[b.ResourceType] = true
		} else {
			x.literal[k] = append(x.literal[k], e)
		}
		x.byType[b.ResourceType] = append(x.byType[b.ResourceType], b)
	}
	return x
}

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a == nil || a.superUsers[principal] }

// Authorize reports whether principal connected from host (an IP address) may perform op
// on the resource of type rt named name (ClusterName for the cluster). It does not
// allocate.
func (a *Authorizer) Authorize(principal, host string, op Operation, rt ResourceType, name string) bool {
	if a == nil || a.superUsers[principal] {
		return true
	}
	x := a.idx.Load()
	var m match
	m.check(x.literal[key{rt, name}], principal, host, op)
	if name != Wildcard {
		m.check(x.literal[key{rt, Wildcard}], principal, host, op)
	}
	if x.hasPrefixed[rt] {
		for i := 1; i <= len(name) && !m.denied; i++ {
			m.check(x.prefixed[key{rt, name[:i]}], principal, host, op)
		}
	}
	switch {
	case m.denied:
		return false
	case !m.found:
		return a.allowEveryone
	}
	return m.allowed
}

// match accumulates the decision of the bindings that apply to one resource.
type match struct{ found, allowed, denied bool }

func (m *match) check(es []entry, principal, host string, op Operation) {
	for i := range es {
		e := &es[i]
		m.found = true
		if (e.principal != principal && e.principal != WildcardPrincipal) || (e.host != host && e.host != Wildcard) {
			continue
		}
		if e.perm == PermissionDeny {
			if e.op == op || e.op == OpAll {
				m.denied = true
				return
			}
			continue
		}
		if implies(e.op, op) {
			m.allowed = true
		}
	}
}

// implies reports whether an ALLOW for granted allows op (StandardAuthorizerData's
// IMPLIES_DESCRIBE and IMPLIES_DESCRIBE_CONFIGS).
func implies(granted, op Operation) bool {
	if granted == op || granted == OpAll {
		return true
	}
	switch op {
	case OpDescribe:
		return granted == OpRead || granted == OpWrite || granted == OpDelete || granted == OpAlter
	case OpDescribeConfigs:
		return granted == OpAlterConfigs
	}
	return false
}

// AuthorizeByResourceType reports whether principal from host may perform op on at least
// one resource of type rt (Kafka's Authorizer.authorizeByResourceType, used for
// idempotent producers without IDEMPOTENT_WRITE on the cluster): some ALLOW for op (or
// ALL) on a LITERAL name or a PREFIXED prefix that no DENY for op (or ALL) covers — a
// DENY on the LITERAL "*" covers everything, a DENY on the same LITERAL name or on a
// PREFIXED prefix of the allowed name covers it. Super users are allowed; a resource
// type without bindings follows allow.everyone.if.no.acl.found.
func (a *Authorizer) AuthorizeByResourceType(principal, host string, op Operation, rt ResourceType) bool {
	if a == nil || a.superUsers[principal] {
		return true
	}
	bs := a.idx.Load().byType[rt]
	if len(bs) == 0 {
		return a.allowEveryone
	}
	applies := func(b *Binding) bool {
		return (b.Principal == principal || b.Principal == WildcardPrincipal) &&
			(b.Host == host || b.Host == Wildcard) && (b.Operation == op || b.Operation == OpAll)
	}
	var denyLiteral, denyPrefix []string
	for i := range bs {
		b := &bs[i]
		if b.Permission != PermissionDeny || !applies(b) {
			continue
		}
		if b.PatternType == PatternLiteral {
			if b.ResourceName == Wildcard {
				return false
			}
			denyLiteral = append(denyLiteral, b.ResourceName)
		} else {
			denyPrefix = append(denyPrefix, b.ResourceName)
		}
	}
	covered := func(name string, literal bool) bool {
		for _, p := range denyPrefix {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		if literal {
			for _, l := range denyLiteral {
				if l == name {
					return true
				}
			}
		}
		return false
	}
	for i := range bs {
		b := &bs[i]
		if b.Permission == PermissionAllow && applies(b) && !covered(b.ResourceName, b.PatternType == PatternLiteral) {
			return true
		}
	}
	return false
}

// supportedOps are the operations each resource type has (Kafka's
// AclEntry.supportedOperations), in code order, for AuthorizedOperations.
var supportedOps = map[ResourceType][]Operation{
	ResourceTopic:           {OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs},
	ResourceGroup:           {OpRead, OpDelete, OpDescribe, OpDescribeConfigs, OpAlterConfigs},
	ResourceCluster:         {OpCreate, OpAlter, OpDescribe, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite},
	ResourceTransactionalID: {OpWrite, OpDescribe, OpTwoPhaseCommit},
	ResourceDelegationToken: {OpDescribe},
	ResourceUser:            {OpCreateTokens, OpDescribeTokens},
	ResourceClusterMirror:   {OpCreate, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs},
}

// AuthorizedOperations is the authorized-operations bit field of Metadata,
// DescribeCluster and DescribeGroups (Kafka's AuthHelper.authorizedOperations: bit
// 1<<code for each supported operation of rt that principal may perform on name; every
// supported operation with authorization off).
func (a *Authorizer) AuthorizedOperations(principal, host string, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOps[rt] {
		if a.Authorize(principal, host, op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}
