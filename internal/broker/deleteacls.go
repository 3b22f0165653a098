package broker

// DeleteAcls (Kafka's AclApis.handleDeleteAcls and AclControlManager.deleteAcls): ALTER on
// the cluster; every binding a filter selects is removed, all filters in one metadata
// batch, and each filter's result lists the bindings it removed.

import (
	"bytes"
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/metadata"
)

func init() { register(kmsg.DeleteACLs, 1, 3, (*Broker).handleDeleteACLs) }

func (b *Broker) handleDeleteACLs(ctx context.Context, req *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	if e, msg := b.aclAPIError(ctx, acl.OpAlter); e != nil {
		for range req.Filters {
			r := kmsg.NewDeleteACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = e.Code, msg
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
	b.aclWriteMu.Lock()
	defer b.aclWriteMu.Unlock()
	removed := map[metadata.TopicID]bool{}
	var recs []metadata.Record
	for _, rf := range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		f := acl.Filter{
			ResourceType: acl.ResourceType(rf.ResourceType), ResourceName: rf.ResourceName, PatternType: acl.PatternType(rf.ResourcePatternType),
			Principal: rf.Principal, Host: rf.Host, Operation: acl.Operation(rf.Operation), Permission: acl.Permission(rf.PermissionType),
		}
		if err := f.Validate(); err != nil {
			r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, strp(err.Error())
			resp.Results = append(resp.Results, r)
			continue
		}
		bs, ids := b.matchingBindingIDs(&f)
		for i, bd := range bs {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(bd.ResourceType), bd.ResourceName, kmsg.ACLResourcePatternType(bd.PatternType)
			m.Principal, m.Host = bd.Principal, bd.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(bd.Operation), kmsg.ACLPermissionType(bd.Permission)
			r.MatchingACLs = append(r.MatchingACLs, m)
			if !removed[ids[i]] {
				removed[ids[i]] = true
				recs = append(recs, &metadata.RemoveAccessControlEntryRecord{ID: ids[i]})
			}
		}
		resp.Results = append(resp.Results, r)
	}
	if len(recs) > 0 {
		if _, err := b.meta.Apply(ctx, recs...); err != nil {
			for i := range resp.Results {
				if resp.Results[i].ErrorCode == 0 {
					resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.UnknownServerError.Code, strp(err.Error())
					resp.Results[i].MatchingACLs = nil
				}
			}
		}
	}
	return resp
}

// matchingBindingIDs returns the bindings of the image that f selects and their IDs, in
// the order of their IDs.
func (b *Broker) matchingBindingIDs(f *acl.Filter) ([]acl.Binding, []metadata.TopicID) {
	var ids []metadata.TopicID
	acls := b.meta.Image().ACLs
	for id, r := range acls {
		bd := bindingOf(r)
		if f.Matches(&bd) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(x, y metadata.TopicID) int { return bytes.Compare(x[:], y[:]) })
	bs := make([]acl.Binding, len(ids))
	for i, id := range ids {
		bs[i] = bindingOf(acls[id])
	}
	return bs, ids
}
