package broker

// DescribeConfigs v1–4, AlterConfigs v0–2 and IncrementalAlterConfigs v0–1 for topics
// (resource type 2), the broker (4, name "" for the cluster-wide default or the node
// ID) and cluster mirrors (CLUSTER_MIRROR, spec §10). Follows Kafka's ConfigHelper and
// ConfigAdminManager: names, defaults, sources and synonyms as Kafka reports them.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

const (
	resourceTopic  int8 = 2
	resourceBroker int8 = 4
)

// staticOnlyBrokerKeys cannot change while the broker runs (Kafka: read-only configs).
// The minutes/hours forms of retention and roll time are resolved into log.retention.ms
// and log.roll.ms once, at start-up (config.Def.Fallback); Kafka lets them change
// dynamically, but kmirror would accept such a change without applying it, so it refuses
// it: set log.retention.ms / log.roll.ms instead.
var staticOnlyBrokerKeys = map[string]bool{"node.id": true, "listeners": true, "advertised.listeners": true, "log.dirs": true, "log.dir": true,
	"log.retention.minutes": true, "log.retention.hours": true, "log.roll.hours": true}

func (b *Broker) handleDescribeConfigs(ctx context.Context, req *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		want := func(name string) bool {
			if len(r.ConfigNames) == 0 {
				return true
			}
			for _, n := range r.ConfigNames {
				if n == name {
					return true
				}
			}
			return false
		}
		switch int8(r.ResourceType) {
		case resourceTopic:
			t := b.meta.Image().Topics[r.ResourceName]
			if t == nil {
				rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rr.ErrorMessage = strp("Topic " + r.ResourceName + " does not exist")
				break
			}
			for _, name := range config.Topic.Names() {
				if want(name) {
					rr.Configs = append(rr.Configs, b.describeTopicConfig(t, name, req))
				}
			}
		case resourceBroker:
			if r.ResourceName != "" && r.ResourceName != strconv.Itoa(int(b.nodeID)) {
				rr.ErrorCode = kerr.InvalidRequest.Code
				rr.ErrorMessage = strp("unknown broker " + r.ResourceName)
				break
			}
			for _, name := range config.Broker.Names() {
				if want(name) {
					rr.Configs = append(rr.Configs, b.describeBrokerConfig(name, req))
				}
			}
		case mirrorproto.ConfigResourceTypeClusterMirror:
			cfgs, err := b.mirrors.DescribeMirrorConfigs(ctx, r.ResourceName)
			if err != nil {
				rr.ErrorCode, rr.ErrorMessage = mirrorErrorCode(err), strp(err.Error())
				break
			}
			for _, c := range cfgs {
				if want(c.Name) {
					rr.Configs = append(rr.Configs, c)
				}
			}
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			rr.ErrorMessage = strp(fmt.Sprintf("resource type %d is not supported", r.ResourceType))
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

func doc(d *config.Def, req *kmsg.DescribeConfigsRequest) *string {
	if req.IncludeDocumentation && d != nil {
		return strp(d.Doc)
	}
	return nil
}

func (b *Broker) describeTopicConfig(t *metadata.Topic, name string, req *kmsg.DescribeConfigsRequest) kmsg.DescribeConfigsResponseResourceConfig {
	d := config.Topic[name]
	v, src := b.topicConfig(t, name)
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value, c.Source = name, strp(v), kmsg.ConfigSource(src)
	c.IsDefault = src == sourceDefault
	c.ConfigType = kmsg.ConfigType(d.Type)
	c.Documentation = doc(d, req)
	if req.IncludeSynonyms {
		if tv, ok := t.Configs[name]; ok {
			c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: name, Value: strp(tv), Source: kmsg.ConfigSource(sourceDynamicTopic)})
		}
		if d.Synonym != "" {
			c.ConfigSynonyms = append(c.ConfigSynonyms, b.brokerSynonyms(d.Synonym)...)
		} else {
			c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: name, Value: strp(d.Default), Source: kmsg.ConfigSource(sourceDefault)})
		}
	}
	return c
}

// brokerSynonyms lists a broker key's values from the highest-precedence source down.
func (b *Broker) brokerSynonyms(name string) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	if v, ok := b.meta.Image().BrokerConfigs[name]; ok {
		out = append(out, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: name, Value: strp(v), Source: kmsg.ConfigSource(sourceDynamicDefaultBroker)})
	}
	if v, ok := b.cfg.Get(name); ok {
		out = append(out, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: name, Value: strp(v), Source: kmsg.ConfigSource(sourceStaticBroker)})
	}
	if d := config.Broker[name]; d != nil {
		out = append(out, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{Name: name, Value: strp(d.Default), Source: kmsg.ConfigSource(sourceDefault)})
	}
	return out
}

// brokerConfig is a broker key's effective value and source.
func (b *Broker) brokerConfig(name string) (string, int8) {
	if v, ok := b.meta.Image().BrokerConfigs[name]; ok {
		return v, sourceDynamicDefaultBroker
	}
	if v, ok := b.cfg.Get(name); ok {
		return v, sourceStaticBroker
	}
	return config.Broker[name].Default, sourceDefault
}

func (b *Broker) describeBrokerConfig(name string, req *kmsg.DescribeConfigsRequest) kmsg.DescribeConfigsResponseResourceConfig {
	d := config.Broker[name]
	v, src := b.brokerConfig(name)
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value, c.Source = name, strp(v), kmsg.ConfigSource(src)
	c.IsDefault = src == sourceDefault
	c.ReadOnly = staticOnlyBrokerKeys[name]
	c.ConfigType = kmsg.ConfigType(d.Type)
	c.Documentation = doc(d, req)
	if req.IncludeSynonyms {
		c.ConfigSynonyms = b.brokerSynonyms(name)
	}
	return c
}

func (b *Broker) handleAlterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
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

func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
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

type configOp struct {
	name  string
	value *string // nil = delete
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

func (b *Broker) defFor(rt int8, name string) *config.Def {
	if rt == resourceTopic {
		return config.Topic[name]
	}
	return config.Broker[name]
}

func (b *Broker) effective(rt int8, resource, name string) (string, int8) {
	if rt == resourceTopic {
		if t := b.meta.Image().Topics[resource]; t != nil {
			return b.topicConfig(t, name)
		}
		return "", sourceDefault
	}
	return b.brokerConfig(name)
}

func (b *Broker) currentDynamic(rt int8, resource string) map[string]string {
	im := b.meta.Image()
	if rt == resourceTopic {
		if t := im.Topics[resource]; t != nil {
			return t.Configs
		}
		return nil
	}
	return im.BrokerConfigs
}

// applyConfigOps validates and writes config records for a topic or the broker; the
// error is the Kafka error and message for the resource.
func (b *Broker) applyConfigOps(ctx context.Context, rt int8, resource string, ops []configOp, validateOnly bool) (*kerr.Error, string) {
	switch rt {
	case resourceTopic:
		if b.meta.Image().Topics[resource] == nil {
			return kerr.UnknownTopicOrPartition, "Topic " + resource + " does not exist"
		}
	case resourceBroker:
		if resource != "" && resource != strconv.Itoa(int(b.nodeID)) {
			return kerr.InvalidRequest, "unknown broker " + resource
		}
	default:
		return kerr.InvalidRequest, fmt.Sprintf("resource type %d is not supported", rt)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].name < ops[j].name })
	var recs []metadata.Record
	for _, o := range ops {
		d := b.defFor(rt, o.name)
		if d == nil {
			return kerr.InvalidConfig, fmt.Sprintf("unknown configuration %q", o.name)
		}
		if rt == resourceBroker && staticOnlyBrokerKeys[o.name] {
			return kerr.InvalidRequest, "Cannot update these configs dynamically: " + o.name
		}
		if o.value != nil {
			if err := d.Validate(*o.value); err != nil {
				return kerr.InvalidConfig, err.Error()
			}
			v := strings.TrimSpace(*o.value)
			o.value = &v
		}
		recs = append(recs, &metadata.ConfigRecord{ResourceType: rt, ResourceName: resourceKey(rt, resource), Name: o.name, Value: o.value})
	}
	if validateOnly || len(recs) == 0 {
		return nil, ""
	}
	if _, err := b.meta.Apply(ctx, recs...); err != nil {
		return kerr.UnknownServerError, err.Error()
	}
	if rt == resourceTopic {
		b.applyNow()
	}
	return nil, ""
}

// resourceKey: dynamic broker configs are kept cluster-wide (single node).
func resourceKey(rt int8, name string) string {
	if rt == resourceBroker {
		return ""
	}
	return name
}
