// Package acl is kmirror's authorizer: ACL bindings with the semantics of Apache Kafka's
// org.apache.kafka.metadata.authorizer.StandardAuthorizer (StandardAuthorizerData), over
// the bindings of the metadata log, plus filters with the ANY/MATCH semantics of Kafka's
// AclBindingFilter (DescribeAcls, DeleteAcls). The codes of resource types, pattern
// types, operations and permission types are Kafka's wire codes; ClusterMirror is
// kmirror's own resource type (docs/authorization.md).
package acl

import (
	"fmt"
	"strings"
)

// ResourceType is an ACL resource type (Kafka's org.apache.kafka.common.resource.ResourceType
// codes; ClusterMirror is kmirror's).
type ResourceType int8

// Resource types.
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
	// ResourceClusterMirror is the ClusterMirror resource of the cluster mirroring spec
	// (section 14), named by the mirror name. Apache Kafka 4.4's ResourceType uses 0–7;
	// 64 is the code kmirror's CLUSTER_MIRROR config resource already uses.
	ResourceClusterMirror ResourceType = 64
)

// ClusterName is the name of the one CLUSTER resource (Kafka's "kafka-cluster").
const ClusterName = "kafka-cluster"

// Wildcard is the resource name of a LITERAL binding matching every resource of its type,
// and the host matching every host (Kafka's ResourcePattern.WILDCARD_RESOURCE, "*").
const Wildcard = "*"

// WildcardPrincipal matches every principal (Kafka's "User:*").
const WildcardPrincipal = "User:*"

// PatternType is how a binding's resource name matches (Kafka's PatternType codes).
type PatternType int8

// Pattern types. Any and Match appear in filters only.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is an ACL operation (Kafka's AclOperation codes).
type Operation int8

// Operations. Any appears in filters only.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
	OpTwoPhaseCommit  Operation = 15
)

// Permission is ALLOW or DENY (Kafka's AclPermissionType codes). Any appears in filters only.
type Permission int8

// Permission types.
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Binding is one ACL binding (Kafka's AclBinding): a resource pattern and an access
// control entry. Principal is "TYPE:NAME" ("User:*" for every principal); Host is an IP
// address or "*".
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string
	Host         string
	Operation    Operation
	Permission   Permission
}

// Validate reports why b cannot be stored (Kafka's AclControlManager.validateNewAcl and
// AclBinding.isUnknown), nil when it can: a concrete resource type, LITERAL or PREFIXED,
// a concrete operation and permission, a non-empty name, a "TYPE:NAME" principal and a
// host. The error's text is Kafka's INVALID_REQUEST message.
func (b *Binding) Validate() error {
	switch {
	case b.ResourceType < ResourceTopic || (b.ResourceType > ResourceUser && b.ResourceType != ResourceClusterMirror):
		return fmt.Errorf("invalid resource type %d", b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return fmt.Errorf("invalid pattern type %d", b.PatternType)
	case b.Operation < OpAll || b.Operation > OpTwoPhaseCommit:
		return fmt.Errorf("invalid operation %d", b.Operation)
	case b.Permission != PermissionAllow && b.Permission != PermissionDeny:
		return fmt.Errorf("invalid permission type %d", b.Permission)
	case b.ResourceName == "":
		return fmt.Errorf("resource name should not be empty")
	case b.Host == "":
		return fmt.Errorf("invalid null host")
	case b.ResourceType == ResourceCluster && b.ResourceName != ClusterName:
		return fmt.Errorf("the only valid name for the CLUSTER resource is %s", ClusterName)
	}
	if i := strings.IndexByte(b.Principal, ':'); i <= 0 || i == len(b.Principal)-1 {
		return fmt.Errorf("could not parse principal %q: expected TYPE:NAME", b.Principal)
	}
	return nil
}

var resourceNames = map[ResourceType]string{
	ResourceUnknown: "UNKNOWN", ResourceAny: "ANY", ResourceTopic: "TOPIC", ResourceGroup: "GROUP",
	ResourceCluster: "CLUSTER", ResourceTransactionalID: "TRANSACTIONAL_ID",
	ResourceDelegationToken: "DELEGATION_TOKEN", ResourceUser: "USER", ResourceClusterMirror: "CLUSTER_MIRROR",
}

var opNames = map[Operation]string{
	OpUnknown: "UNKNOWN", OpAny: "ANY", OpAll: "ALL", OpRead: "READ", OpWrite: "WRITE", OpCreate: "CREATE",
	OpDelete: "DELETE", OpAlter: "ALTER", OpDescribe: "DESCRIBE", OpClusterAction: "CLUSTER_ACTION",
	OpDescribeConfigs: "DESCRIBE_CONFIGS", OpAlterConfigs: "ALTER_CONFIGS", OpIdempotentWrite: "IDEMPOTENT_WRITE",
	OpCreateTokens: "CREATE_TOKENS", OpDescribeTokens: "DESCRIBE_TOKENS", OpTwoPhaseCommit: "TWO_PHASE_COMMIT",
}

var patternNames = map[PatternType]string{
	PatternUnknown: "UNKNOWN", PatternAny: "ANY", PatternMatch: "MATCH", PatternLiteral: "LITERAL", PatternPrefixed: "PREFIXED",
}

var permissionNames = map[Permission]string{
	PermissionUnknown: "UNKNOWN", PermissionAny: "ANY", PermissionDeny: "DENY", PermissionAllow: "ALLOW",
}

func (t ResourceType) String() string { return nameOr(resourceNames, t) }
func (o Operation) String() string    { return nameOr(opNames, o) }
func (p PatternType) String() string  { return nameOr(patternNames, p) }
func (p Permission) String() string   { return nameOr(permissionNames, p) }

func nameOr[K ~int8](names map[K]string, k K) string {
	if s, ok := names[k]; ok {
		return s
	}
	return fmt.Sprintf("%d", k)
}

// ParseResourceType parses a resource type name as String writes it (case-insensitive;
// "ClusterMirror" and "TransactionalId" as Kafka's camel-case forms are accepted too).
func ParseResourceType(s string) (ResourceType, bool) {
	return parseName(resourceNames, s)
}

// ParseOperation parses an operation name as String writes it (case-insensitive).
func ParseOperation(s string) (Operation, bool) { return parseName(opNames, s) }

// ParsePermission parses ALLOW, DENY or ANY (case-insensitive).
func ParsePermission(s string) (Permission, bool) { return parseName(permissionNames, s) }

func parseName[K ~int8](names map[K]string, s string) (K, bool) {
	norm := func(x string) string { return strings.ReplaceAll(strings.ToUpper(x), "_", "") }
	s = norm(s)
	for k, n := range names {
		if norm(n) == s {
			return k, true
		}
	}
	return 0, false
}

func (b Binding) String() string {
	return fmt.Sprintf("(resourceType=%s, name=%s, patternType=%s, principal=%s, host=%s, operation=%s, permissionType=%s)",
		b.ResourceType, b.ResourceName, b.PatternType, b.Principal, b.Host, b.Operation, b.Permission)
}
