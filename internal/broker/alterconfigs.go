package broker

// AlterConfigs: the whole set of dynamic configs of a topic, the broker or a cluster
// mirror replaced by the request's (configs.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

func init() { register(kmsg.AlterConfigs, 0, 2, (*Broker).handleAlterConfigs) }

func (b *Broker) handleAlterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		if e, msg := b.authorizeConfigResource(ctx, acl.OpAlterConfigs, int8(r.ResourceType), r.ResourceName); e != nil {
			rr.ErrorCode, rr.ErrorMessage = e.Code, strp(msg)
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		// AlterConfigs replaces the whole set of dynamic configs of the resource.
		want := map[string]*string{}
		for _, c := range r.Configs {
			want[c.Name] = c.Value
		}
		current := b.currentDynamic(int8(r.ResourceType), r.ResourceName)
		var ops []configOp
		for name := range current {
			if _, ok := want[name]; !ok {
				ops = append(ops, configOp{name: name, value: nil})
			}
		}
		for name, v := range want {
			ops = append(ops, configOp{name: name, value: v})
		}
		if int8(r.ResourceType) == mirrorproto.ConfigResourceTypeClusterMirror {
			var inc []kmsg.IncrementalAlterConfigsRequestResourceConfig
			for _, o := range ops {
				op := kmsg.IncrementalAlterConfigOpSet
				if o.value == nil {
					op = kmsg.IncrementalAlterConfigOpDelete
				}
				inc = append(inc, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: o.name, Op: op, Value: o.value})
			}
			if err := b.mirrors.AlterMirrorConfigs(ctx, r.ResourceName, inc, req.ValidateOnly); err != nil {
				rr.ErrorCode, rr.ErrorMessage = mirrorErrorCode(err), strp(err.Error())
			}
		} else if e, msg := b.applyConfigOps(ctx, int8(r.ResourceType), r.ResourceName, ops, req.ValidateOnly); e != nil {
			rr.ErrorCode, rr.ErrorMessage = e.Code, strp(msg)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}
