package broker

// DescribeAcls (Kafka's AclApis.handleDescribeAcls): DESCRIBE on the cluster; the bindings
// the filter selects, grouped by resource pattern.

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

func init() { register(kmsg.DescribeACLs, 1, 3, (*Broker).handleDescribeACLs) }

// aclAPIError is why a request of the ACL APIs is refused (Kafka's AclApis): SECURITY_DISABLED
// without an authorizer, CLUSTER_AUTHORIZATION_FAILED without op (DESCRIBE to list, ALTER
// to create or delete) on the cluster; nil when it may go on.
func (b *Broker) aclAPIError(ctx context.Context, op acl.Operation) (*kerr.Error, *string) {
	if b.authorization.authz == nil {
		return kerr.SecurityDisabled, strp("No Authorizer is configured.")
	}
	if !b.authorizeCluster(ctx, op) {
		return kerr.ClusterAuthorizationFailed, nil
	}
	return nil, nil
}

func (b *Broker) handleDescribeACLs(ctx context.Context, req *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if e, msg := b.aclAPIError(ctx, acl.OpDescribe); e != nil {
		resp.ErrorCode, resp.ErrorMessage = e.Code, msg
		return resp
	}
	f := acl.Filter{
		ResourceType: acl.ResourceType(req.ResourceType), ResourceName: req.ResourceName, PatternType: acl.PatternType(req.ResourcePatternType),
		Principal: req.Principal, Host: req.Host, Operation: acl.Operation(req.Operation), Permission: acl.Permission(req.PermissionType),
	}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, strp(err.Error())
		return resp
	}
	type pattern struct {
		rt   acl.ResourceType
		name string
		pt   acl.PatternType
	}
	byPattern := map[pattern][]kmsg.DescribeACLsResponseResourceACL{}
	for _, bd := range b.matchingBindings(&f) {
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host = bd.Principal, bd.Host
		a.Operation, a.PermissionType = kmsg.ACLOperation(bd.Operation), kmsg.ACLPermissionType(bd.Permission)
		p := pattern{bd.ResourceType, bd.ResourceName, bd.PatternType}
		byPattern[p] = append(byPattern[p], a)
	}
	for p, acls := range byPattern {
		r := kmsg.NewDescribeACLsResponseResource()
		r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(p.rt), p.name, kmsg.ACLResourcePatternType(p.pt)
		r.ACLs = acls
		resp.Resources = append(resp.Resources, r)
	}
	slices.SortFunc(resp.Resources, func(x, y kmsg.DescribeACLsResponseResource) int {
		return cmp.Or(cmp.Compare(x.ResourceType, y.ResourceType), strings.Compare(x.ResourceName, y.ResourceName), cmp.Compare(x.ResourcePatternType, y.ResourcePatternType))
	})
	return resp
}

// matchingBindings returns the bindings of the image that f selects, with their IDs in
// the same order (DescribeAcls, DeleteAcls), sorted for a stable answer.
func (b *Broker) matchingBindings(f *acl.Filter) []acl.Binding {
	bs, _ := b.matchingBindingIDs(f)
	return bs
}
