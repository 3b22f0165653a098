package mirror

// The ACL sync task (spec section 9, docs/mirroring.md): the source's ACL bindings that
// match the mirror's acls.include rules are created on the destination, and the ones it
// created that vanished from the source are removed. ClusterMirror bindings are never
// read, created or removed. A source without an authorizer (DescribeAcls answered
// SECURITY_DISABLED) is skipped, logged once at INFO.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/metadata"
)

// aclRule is one acls.include rule, resourceType;resourceName;operation;permissionType;principal:
// a zero type, operation or permission and a nil regex match anything ("*").
type aclRule struct {
	rt        acl.ResourceType
	name      *regexp.Regexp
	op        acl.Operation
	perm      acl.Permission
	principal *regexp.Regexp
}

// parseACLRules parses acls.include: comma-separated rules of five semicolon-separated
// fields, each "*" for anything; the type, operation and permission by their Kafka names
// (TOPIC, READ, ALLOW, ...), the resource name and principal as regexes of the whole
// string. A rule "*" alone matches every binding.
func parseACLRules(list string) ([]aclRule, error) {
	var out []aclRule
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if s == "*" {
			out = append(out, aclRule{})
			continue
		}
		f := strings.Split(s, ";")
		if len(f) != 5 {
			return nil, fmt.Errorf("rule %q: want resourceType;resourceName;operation;permissionType;principal", s)
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		var r aclRule
		var ok bool
		if f[0] != "*" {
			if r.rt, ok = acl.ParseResourceType(f[0]); !ok || r.rt == acl.ResourceAny || r.rt == acl.ResourceUnknown {
				return nil, fmt.Errorf("rule %q: unknown resource type %q", s, f[0])
			}
		}
		if f[2] != "*" {
			if r.op, ok = acl.ParseOperation(f[2]); !ok || r.op == acl.OpAny || r.op == acl.OpUnknown {
				return nil, fmt.Errorf("rule %q: unknown operation %q", s, f[2])
			}
		}
		if f[3] != "*" {
			if r.perm, ok = acl.ParsePermission(f[3]); !ok || r.perm == acl.PermissionAny || r.perm == acl.PermissionUnknown {
				return nil, fmt.Errorf("rule %q: unknown permission type %q", s, f[3])
			}
		}
		var err error
		if f[1] != "*" {
			if r.name, err = compileAnchored(f[1]); err != nil {
				return nil, fmt.Errorf("rule %q: %v", s, err)
			}
		}
		if f[4] != "*" {
			if r.principal, err = compileAnchored(f[4]); err != nil {
				return nil, fmt.Errorf("rule %q: %v", s, err)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// syncedACL reports whether the mirror syncs b: not a ClusterMirror binding, and matched
// by one of rules.
func syncedACL(rules []aclRule, b *acl.Binding) bool {
	if b.ResourceType == acl.ResourceClusterMirror {
		return false
	}
	for _, r := range rules {
		if (r.rt == 0 || r.rt == b.ResourceType) && (r.op == 0 || r.op == b.Operation) && (r.perm == 0 || r.perm == b.Permission) &&
			(r.name == nil || r.name.MatchString(b.ResourceName)) && (r.principal == nil || r.principal.MatchString(b.Principal)) {
			return true
		}
	}
	return false
}

// sourceACLs returns every binding of the source (DescribeAcls with the ANY filter).
func sourceACLs(ctx context.Context, src *source) ([]acl.Binding, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, src.cl)
	if err != nil {
		return nil, fmt.Errorf("DescribeAcls on the source: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if err == kerr.SecurityDisabled {
			return nil, err
		}
		msg := ""
		if resp.ErrorMessage != nil {
			msg = ": " + *resp.ErrorMessage
		}
		return nil, fmt.Errorf("DescribeAcls on the source: %w%s", err, msg)
	}
	var out []acl.Binding
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, acl.Binding{ResourceType: acl.ResourceType(r.ResourceType), ResourceName: r.ResourceName,
				PatternType: acl.PatternType(r.ResourcePatternType), Principal: a.Principal, Host: a.Host,
				Operation: acl.Operation(a.Operation), Permission: acl.Permission(a.PermissionType)})
		}
	}
	return out, nil
}

// syncACLs is the ACL task: it creates on the destination the source bindings the rules
// select that it lacks, and removes the destination bindings this task saw on the source
// earlier (r.syncedACLs) that the source no longer has or the rules no longer select.
// The bindings are written through the metadata log in one batch.
func (r *mirrorRT) syncACLs(ctx context.Context, src *source, cfg *mirrorConfig) error {
	bs, err := sourceACLs(ctx, src)
	if errors.Is(err, kerr.SecurityDisabled) {
		if !r.aclSyncSkippedLogged {
			r.m.log.Info("mirror: the source has no authorizer (DescribeAcls: SECURITY_DISABLED); ACL sync skipped", "mirror", r.name)
			r.aclSyncSkippedLogged = true
		}
		return nil
	}
	if err != nil {
		return err
	}
	r.aclSyncSkippedLogged = false
	want := map[acl.Binding]bool{}
	for i := range bs {
		if syncedACL(cfg.aclRules, &bs[i]) {
			want[bs[i]] = true
		}
	}
	local := map[acl.Binding]metadata.TopicID{}
	for id, rec := range r.m.local.Metadata().Image().ACLs {
		local[bindingOfRecord(rec)] = id
	}
	var recs []metadata.Record
	created, removed := 0, 0
	for b := range want {
		if _, ok := local[b]; !ok {
			recs = append(recs, &metadata.AccessControlEntryRecord{ID: metadata.NewTopicID(), ResourceType: int8(b.ResourceType),
				ResourceName: b.ResourceName, PatternType: int8(b.PatternType), Principal: b.Principal, Host: b.Host,
				Operation: int8(b.Operation), PermissionType: int8(b.Permission)})
			created++
		}
	}
	for b := range r.syncedACLs {
		if want[b] {
			continue
		}
		if id, ok := local[b]; ok {
			recs = append(recs, &metadata.RemoveAccessControlEntryRecord{ID: id})
			removed++
		}
	}
	if len(recs) > 0 {
		if _, err := r.m.local.Metadata().Apply(ctx, recs...); err != nil {
			return fmt.Errorf("write ACL bindings: %w", err)
		}
		r.m.log.Info("mirror: ACL bindings synced from the source", "mirror", r.name, "created", created, "removed", removed)
	}
	r.syncedACLs = want
	return nil
}

// bindingOfRecord is the binding an image ACL record stores.
func bindingOfRecord(r *metadata.AccessControlEntryRecord) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceType(r.ResourceType), ResourceName: r.ResourceName, PatternType: acl.PatternType(r.PatternType),
		Principal: r.Principal, Host: r.Host, Operation: acl.Operation(r.Operation), Permission: acl.Permission(r.PermissionType)}
}
