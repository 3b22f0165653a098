package broker

// What the config APIs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) share:
// they serve topics (resource type 2), the broker (4, name "" for the cluster-wide default
// or the node ID) and cluster mirrors (CLUSTER_MIRROR, spec §10). Follows Kafka's
// ConfigHelper and ConfigAdminManager: names, defaults, sources and synonyms as Kafka
// reports them.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

const (
	resourceTopic  int8 = 2
	resourceBroker int8 = 4
)

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

type configOp struct {
	name  string
	value *string // nil = delete
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
		if rt == resourceBroker && !config.IsDynamicBrokerKey(o.name) {
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

// mirrorErrorCode maps a mirror manager error to a code for a standard config RPC:
// RESOURCE_NOT_FOUND for an unknown mirror, INVALID_CONFIG otherwise; the message
// (which names the KIP error) goes in ErrorMessage.
func mirrorErrorCode(err error) int16 {
	var me *mirrorproto.Error
	if errors.As(err, &me) && me.Code == mirrorproto.UnknownClusterMirror {
		return kerr.ResourceNotFound.Code
	}
	return kerr.InvalidConfig.Code
}
