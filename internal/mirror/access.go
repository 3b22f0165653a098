package mirror

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// Write operations checked by CheckWrite.
const (
	OpProduce           = "produce"
	OpAddPartitionsToTx = "add_partitions_to_txn"
	OpDeleteRecords     = "delete_records"
	OpDeleteTopics      = "delete_topics"
	OpCreatePartitions  = "create_partitions"
)

// CheckWrite tells the broker whether op may touch topic/partition (partition −1 = the
// whole topic, for DeleteTopics and CreatePartitions). A topic is writable when it is not
// a mirror topic, or when its desired state is stopped and the partition (every
// partition for −1) is STOPPED (spec sections 7, 8, 10). Otherwise ok is false and
// message is what the broker puts after POLICY_VIOLATION: "READ_ONLY_TOPIC: …" for
// produce and add_partitions_to_txn, "INVALID_CLUSTER_MIRROR_STATES: …" for the others.
func (m *Manager) CheckWrite(topic string, partIdx int32, op string) (ok bool, message string) {
	im := m.local.Metadata().Image()
	t := im.Topics[topic]
	if t == nil || t.Mirror == nil {
		return true, ""
	}
	if _, exists := im.Mirrors[t.Mirror.MirrorName]; !exists {
		return true, ""
	}
	state := mirrorproto.StateUnknown
	writable := t.Mirror.Desired == metadata.DesiredStopped
	var ps []*partition
	if partIdx >= 0 {
		if p := m.partitionOf(topic, partIdx); p != nil {
			ps = append(ps, p)
		} else {
			writable = false
		}
	} else {
		ps = m.topicPartitions(topic)
		if int32(len(ps)) < t.Partitions {
			writable = false
		}
	}
	for _, p := range ps {
		if s := p.state(); s != mirrorproto.StateStopped {
			writable = false
			state = s
			break
		}
		state = mirrorproto.StateStopped
	}
	if writable {
		return true, ""
	}
	if state == mirrorproto.StateStopped {
		state = mirrorproto.StateLogAlignment // restarted, not yet aligned
	}
	switch op {
	case OpProduce, OpAddPartitionsToTx:
		return false, fmt.Sprintf("READ_ONLY_TOPIC: %s is a mirror topic of %s (%s); stop mirroring to write to it",
			topic, t.Mirror.MirrorName, state)
	default:
		return false, fmt.Sprintf("INVALID_CLUSTER_MIRROR_STATES: %s is a mirror topic of %s (%s); stop mirroring before %s",
			topic, t.Mirror.MirrorName, state, strings.ReplaceAll(op, "_", " "))
	}
}

// DescribeMirrorConfigs describes the CLUSTER_MIRROR config resource name (spec section
// 10): every mirror config with its value or default; secrets (sasl.jaas.config,
// sasl.password, ssl.*password, inline keys) have a nil value and IsSensitive.
// Errors: *mirrorproto.Error with UNKNOWN_CLUSTER_MIRROR.
func (m *Manager) DescribeMirrorConfigs(ctx context.Context, name string) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	_, mir, merr := m.lookupMirror(ctx, name, -1)
	if merr != nil {
		return nil, merr
	}
	raw := normalizeConfigs(mir.Configs)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	add := func(n string, v *string, set bool, d configDef, readOnly bool) {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = n
		c.ReadOnly = readOnly
		c.IsSensitive = config.MirrorSecret(n)
		if !c.IsSensitive {
			c.Value = v
		}
		c.IsDefault = !set
		if set {
			c.Source = kmsg.ConfigSourceDynamicTopicConfig
		} else {
			c.Source = kmsg.ConfigSourceDefaultConfig
		}
		c.ConfigType = d.typ
		if c.ConfigType == 0 {
			c.ConfigType = kmsg.ConfigTypeString
		}
		if d.doc != "" {
			c.Documentation = strp(d.doc)
		}
		out = append(out, c)
	}
	for _, d := range configDefs {
		if d.name == cfgSourceClusterID {
			add(d.name, strp(mir.SourceClusterID), true, d, true)
			continue
		}
		if v, set := raw[d.name]; set {
			add(d.name, strp(v), true, d, false)
		} else if d.hasDef {
			add(d.name, strp(d.def), false, d, false)
		}
	}
	var extra []string
	for k := range raw {
		if _, known := findDef(k); !known {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		add(k, strp(raw[k]), true, configDef{typ: kmsg.ConfigTypeString}, false)
	}
	return out, nil
}

// checkSourceCluster refuses a new bootstrap.servers that answers with another cluster ID
// than the mirror's source (a typo pointing at another cluster would otherwise have its
// topic configs copied before the partitions fail). An unreachable address is accepted
// (a source may be down while its address changes); the runner checks on connecting.
func (m *Manager) checkSourceCluster(ctx context.Context, name string, cfg *mirrorConfig, want string) error {
	src, err := newSource(name, cfg)
	if err != nil {
		return err
	}
	defer src.close()
	rctx, cancel := context.WithTimeout(ctx, sourceTimeout(cfg))
	defer cancel()
	cid, err := src.clusterID(rctx)
	if err != nil {
		m.log.Warn("mirror: new bootstrap.servers not reachable, its cluster ID is checked on connecting", "mirror", name, "err", err)
		return nil
	}
	if cid != want {
		return fmt.Errorf("bootstrap.servers %s is cluster %s, but mirror %s mirrors cluster %s", strings.Join(cfg.bootstrap, ","), cid, name, want)
	}
	return nil
}

// AlterMirrorConfigs applies IncrementalAlterConfigs operations (SET 0, DELETE 1, APPEND 2,
// SUBTRACT 3) to the CLUSTER_MIRROR resource name (spec section 10). The result must
// still be a valid mirror configuration; source.cluster.id is read-only. A change of a
// connection setting (bootstrap.servers, security.protocol, sasl.*, ssl.*,
// request.timeout.ms) reconnects the mirror's fetchers; a new bootstrap.servers that
// answers with another cluster ID is refused (checkSourceCluster). Errors:
// *mirrorproto.Error with UNKNOWN_CLUSTER_MIRROR or INVALID_CONFIG.
func (m *Manager) AlterMirrorConfigs(ctx context.Context, name string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) error {
	_, mir, merr := m.lookupMirror(ctx, name, -1)
	if merr != nil {
		return merr
	}
	invalid := func(format string, args ...any) error {
		return &mirrorproto.Error{Code: kerr.InvalidConfig.Code, Message: fmt.Sprintf(format, args...)}
	}
	old := normalizeConfigs(mir.Configs)
	next := normalizeConfigs(mir.Configs)
	for _, op := range ops {
		n := canonicalName(op.Name)
		if n == cfgSourceClusterID {
			return invalid("%s is read-only", n)
		}
		val := ""
		if op.Value != nil {
			val = *op.Value
		}
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return invalid("SET of %s needs a value", n)
			}
			next[n] = val
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, n)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			cur, set := next[n]
			if !set {
				d, _ := findDef(n)
				cur = d.def
			}
			list := splitList(cur)
			for _, v := range splitList(val) {
				if op.Op == kmsg.IncrementalAlterConfigOpAppend {
					if !containsStr(list, v) {
						list = append(list, v)
					}
				} else {
					kept := list[:0]
					for _, x := range list {
						if x != v {
							kept = append(kept, x)
						}
					}
					list = kept
				}
			}
			next[n] = strings.Join(list, ",")
		default:
			return invalid("unknown config operation %d", op.Op)
		}
	}
	cfg, err := parseMirrorConfig(next)
	if err != nil {
		return invalid("%v", err)
	}
	if old[cfgBootstrap] != next[cfgBootstrap] && mir.SourceClusterID != "" {
		if err := m.checkSourceCluster(ctx, name, cfg, mir.SourceClusterID); err != nil {
			return invalid("%v", err)
		}
	}
	if validateOnly {
		return nil
	}
	var recs []metadata.Record
	for k, v := range next {
		if ov, ok := old[k]; !ok || ov != v {
			v := v
			recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceClusterMirror, ResourceName: name, Name: k, Value: &v})
		}
	}
	for k := range old { // stored names are canonical (CreateClusterMirror normalises them)
		if _, ok := next[k]; !ok {
			recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceClusterMirror, ResourceName: name, Name: k, Value: nil})
		}
	}
	if _, err := m.local.Metadata().Apply(ctx, recs...); err != nil {
		return fmt.Errorf("store the mirror configs: %w", err)
	}
	if r := m.runner(name); r != nil {
		r.kick()
	}
	return nil
}
