package broker

// IncrementalAlterConfigs (Kafka's ConfigAdminManager.incrementalAlterConfigs): SET,
// DELETE, APPEND and SUBTRACT (list keys only) on the dynamic configs of a topic, the
// broker or a cluster mirror (configs.go).

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

func init() { register(kmsg.IncrementalAlterConfigs, 0, 1, (*Broker).handleIncrementalAlterConfigs) }

func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		if e, msg := b.authorizeConfigResource(ctx, acl.OpAlterConfigs, int8(r.ResourceType), r.ResourceName); e != nil {
			rr.ErrorCode, rr.ErrorMessage = e.Code, strp(msg)
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		if int8(r.ResourceType) == mirrorproto.ConfigResourceTypeClusterMirror {
			if err := b.mirrors.AlterMirrorConfigs(ctx, r.ResourceName, r.Configs, req.ValidateOnly); err != nil {
				rr.ErrorCode, rr.ErrorMessage = mirrorErrorCode(err), strp(err.Error())
			}
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		current := b.currentDynamic(int8(r.ResourceType), r.ResourceName)
		var ops []configOp
		var bad string
		for _, c := range r.Configs {
			switch c.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				ops = append(ops, configOp{name: c.Name, value: c.Value})
			case kmsg.IncrementalAlterConfigOpDelete:
				ops = append(ops, configOp{name: c.Name})
			case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
				d := b.defFor(int8(r.ResourceType), c.Name)
				if d == nil || d.Type != config.TypeList {
					bad = "Config value append/subtract is not allowed for config key " + c.Name
					break
				}
				cur := current[c.Name]
				if cur == "" {
					cur, _ = b.effective(int8(r.ResourceType), r.ResourceName, c.Name)
				}
				v := listOp(cur, c.Value, c.Op == kmsg.IncrementalAlterConfigOpAppend)
				ops = append(ops, configOp{name: c.Name, value: &v})
			default:
				bad = fmt.Sprintf("unknown config operation %d", c.Op)
			}
		}
		if bad != "" {
			rr.ErrorCode, rr.ErrorMessage = kerr.InvalidConfig.Code, strp(bad)
		} else if e, msg := b.applyConfigOps(ctx, int8(r.ResourceType), r.ResourceName, ops, req.ValidateOnly); e != nil {
			rr.ErrorCode, rr.ErrorMessage = e.Code, strp(msg)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

func listOp(cur string, v *string, add bool) string {
	var items []string
	for _, s := range strings.Split(cur, ",") {
		if s = strings.TrimSpace(s); s != "" {
			items = append(items, s)
		}
	}
	if v != nil {
		for _, s := range strings.Split(*v, ",") {
			s = strings.TrimSpace(s)
			idx := -1
			for i, it := range items {
				if it == s {
					idx = i
				}
			}
			if add && idx < 0 && s != "" {
				items = append(items, s)
			} else if !add && idx >= 0 {
				items = append(items[:idx], items[idx+1:]...)
			}
		}
	}
	return strings.Join(items, ",")
}
