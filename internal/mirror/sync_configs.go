package mirror

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metadata"
)

// sourceTopicConfigs returns, per topic, the configs explicitly set on the source
// (DescribeConfigs source DYNAMIC_TOPIC_CONFIG) that the mirror copies (spec section 9):
// not in topic.properties.exclude, not sensitive, known to kmirror's topic config
// definitions and valid for them (others are skipped with a debug log). Topics the
// source does not know are left out.
func (m *Manager) sourceTopicConfigs(ctx context.Context, src *source, cfg *mirrorConfig, topics []string) (map[string]map[string]string, error) {
	rcs, err := kadm.NewClient(src.cl).DescribeTopicConfigs(ctx, topics...)
	if err != nil && len(rcs) == 0 {
		return nil, fmt.Errorf("DescribeConfigs on the source: %w", err)
	}
	out := map[string]map[string]string{}
	var errs []string
	for _, rc := range rcs {
		if rc.Err != nil {
			if !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
				errs = append(errs, fmt.Sprintf("%s: %v", rc.Name, rc.Err))
			}
			continue
		}
		set := map[string]string{}
		for _, c := range rc.Configs {
			if c.Source != kmsg.ConfigSourceDynamicTopicConfig || c.Value == nil || c.Sensitive || cfg.topicPropsExcl[c.Key] {
				continue
			}
			def := config.Topic[c.Key]
			if def == nil {
				m.log.Debug("mirror: source topic config unknown to kmirror, not synced", "topic", rc.Name, "config", c.Key)
				continue
			}
			if err := def.Validate(*c.Value); err != nil {
				m.log.Debug("mirror: source topic config not valid here, not synced", "topic", rc.Name, "config", c.Key, "err", err)
				continue
			}
			set[c.Key] = strings.TrimSpace(*c.Value)
		}
		out[rc.Name] = set
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return out, fmt.Errorf("DescribeConfigs on the source: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// creationConfigs returns the configs to create new mirror topics with; a failure is
// logged and yields none (the periodic sync copies them later).
func (m *Manager) creationConfigs(ctx context.Context, src *source, cfg *mirrorConfig, topics []string) map[string]map[string]string {
	out, err := m.sourceTopicConfigs(ctx, src, cfg, topics)
	if err != nil {
		m.log.Warn("mirror: source topic configs at creation", "topics", strings.Join(topics, ","), "err", err)
	}
	return out
}

// syncTopicConfigs is the topic config task (spec section 9): for every mirror topic
// whose desired state is MIRRORING (PAUSED and STOPPED topics are skipped), the copied
// source configs are written through the metadata log where the local value differs
// (a local edit of a synced key is reverted), and a key copied at an earlier sync that
// the source no longer sets is deleted.
func (r *mirrorRT) syncTopicConfigs(ctx context.Context, src *source, cfg *mirrorConfig) error {
	im := r.m.local.Metadata().Image()
	topics := activeMirrorTopics(im, r.name, metadata.DesiredMirroring)
	if len(topics) == 0 {
		return nil
	}
	names := make([]string, 0, len(topics))
	for _, t := range topics {
		names = append(names, t.Name)
	}
	srcCfgs, fetchErr := r.m.sourceTopicConfigs(ctx, src, cfg, names)
	if srcCfgs == nil {
		return fetchErr
	}
	var recs []metadata.Record
	for _, t := range topics {
		want, ok := srcCfgs[t.Name]
		if !ok {
			continue // unknown on the source: the runner handles deletion
		}
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if cur, ok := t.Configs[k]; !ok || cur != want[k] {
				v := want[k]
				recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: t.Name, Name: k, Value: &v})
			}
		}
		prev := r.syncedKeys[t.Name]
		gone := make([]string, 0)
		for k := range prev {
			if _, still := want[k]; !still && !cfg.topicPropsExcl[k] {
				if _, set := t.Configs[k]; set {
					gone = append(gone, k)
				}
			}
		}
		sort.Strings(gone)
		for _, k := range gone {
			recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: t.Name, Name: k})
		}
		synced := make(map[string]bool, len(want))
		for k := range want {
			synced[k] = true
		}
		r.syncedKeys[t.Name] = synced
	}
	if len(recs) > 0 {
		if _, err := r.m.local.Metadata().Apply(ctx, recs...); err != nil {
			return fmt.Errorf("write topic configs: %w", err)
		}
		r.m.log.Info("mirror: topic configs synced from the source", "mirror", r.name, "changes", len(recs))
	}
	return fetchErr
}
