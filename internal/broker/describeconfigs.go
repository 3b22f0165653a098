package broker

// DescribeConfigs (Kafka's ConfigHelper.describeConfigs): the configs of a topic, the
// broker or a cluster mirror with their sources, synonyms and documentation as Kafka
// reports them (configs.go).

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

func init() { register(kmsg.DescribeConfigs, 1, 4, (*Broker).handleDescribeConfigs) }

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
		if e, msg := b.authorizeConfigResource(ctx, acl.OpDescribeConfigs, int8(r.ResourceType), r.ResourceName); e != nil {
			rr.ErrorCode, rr.ErrorMessage = e.Code, strp(msg)
			resp.Resources = append(resp.Resources, rr)
			continue
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

func (b *Broker) describeBrokerConfig(name string, req *kmsg.DescribeConfigsRequest) kmsg.DescribeConfigsResponseResourceConfig {
	d := config.Broker[name]
	v, src := b.brokerConfig(name)
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value, c.Source = name, strp(v), kmsg.ConfigSource(src)
	c.IsDefault = src == sourceDefault
	c.ReadOnly = !config.IsDynamicBrokerKey(name)
	c.ConfigType = kmsg.ConfigType(d.Type)
	c.Documentation = doc(d, req)
	if req.IncludeSynonyms {
		c.ConfigSynonyms = b.brokerSynonyms(name)
	}
	if d.Sensitive || d.Type == config.TypePassword {
		// Kafka's ConfigHelper: a sensitive value (and its synonyms') is returned as null.
		c.IsSensitive, c.Value = true, nil
		for i := range c.ConfigSynonyms {
			c.ConfigSynonyms[i].Value = nil
		}
	}
	return c
}
