package broker

// CreateAcls (Kafka's AclApis.handleCreateAcls and AclControlManager.createAcls): ALTER on
// the cluster; each creation is validated on its own, an existing identical binding is
// a success that writes nothing, and the new bindings are written as one metadata batch.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/metadata"
)

func init() { register(kmsg.CreateACLs, 1, 3, (*Broker).handleCreateACLs) }

func (b *Broker) handleCreateACLs(ctx context.Context, req *kmsg.CreateACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	if e, msg := b.aclAPIError(ctx, acl.OpAlter); e != nil {
		for range req.Creations {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = e.Code, msg
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
	b.aclWriteMu.Lock()
	defer b.aclWriteMu.Unlock()
	existing := map[acl.Binding]bool{}
	for _, r := range b.meta.Image().ACLs {
		existing[bindingOf(r)] = true
	}
	var recs []metadata.Record
	var written []int // indexes of resp.Results whose binding is in recs
	for _, c := range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		bd := acl.Binding{
			ResourceType: acl.ResourceType(c.ResourceType), ResourceName: c.ResourceName, PatternType: acl.PatternType(c.ResourcePatternType),
			Principal: c.Principal, Host: c.Host, Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType),
		}
		if err := bd.Validate(); err != nil {
			r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, strp(err.Error())
		} else if !existing[bd] {
			existing[bd] = true
			recs = append(recs, aclRecord(metadata.NewTopicID(), bd))
			written = append(written, len(resp.Results))
		}
		resp.Results = append(resp.Results, r)
	}
	if len(recs) > 0 {
		if _, err := b.meta.Apply(ctx, recs...); err != nil {
			for _, i := range written {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.UnknownServerError.Code, strp(err.Error())
			}
		}
	}
	return resp
}

// aclRecord is the metadata record of binding bd under id.
func aclRecord(id metadata.TopicID, bd acl.Binding) *metadata.AccessControlEntryRecord {
	return &metadata.AccessControlEntryRecord{
		ID: id, ResourceType: int8(bd.ResourceType), ResourceName: bd.ResourceName, PatternType: int8(bd.PatternType),
		Principal: bd.Principal, Host: bd.Host, Operation: int8(bd.Operation), PermissionType: int8(bd.Permission),
	}
}
