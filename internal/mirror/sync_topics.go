package mirror

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// stopExcluded stops (fails over) the active mirror topics that topics.exclude now
// matches, and returns what went wrong. It needs nothing from the source, so it also runs
// while the source does not answer: an operator may fail topics over this way in a
// disaster.
func (r *mirrorRT) stopExcluded(ctx context.Context, im *metadata.Image, cfg *mirrorConfig) []string {
	var stop []string
	for _, t := range activeMirrorTopics(im, r.name, metadata.DesiredMirroring, metadata.DesiredPaused) {
		if matchAny(cfg.exclude, t.Name) || isInternal(t.Name) {
			stop = append(stop, t.Name)
		}
	}
	var errs []string
	if len(stop) > 0 {
		req := mirrorproto.NewStopMirrorTopicsRequest()
		req.MirrorName = r.name
		for _, n := range stop {
			req.Topics = append(req.Topics, mirrorproto.TopicName{TopicName: n})
		}
		resp := r.m.StopMirrorTopics(ctx, req)
		if resp.ErrorCode != 0 {
			errs = append(errs, "stop excluded topics: "+mirrorproto.ErrorFor(resp.ErrorCode, resp.ErrorMessage).Error())
		}
		for _, tr := range resp.Topics {
			if tr.ErrorCode != 0 {
				errs = append(errs, fmt.Sprintf("stop excluded topic %s: %v", tr.Name, mirrorproto.ErrorFor(tr.ErrorCode, tr.ErrorMessage)))
			} else {
				r.m.log.Info("mirror: stopped a mirror topic excluded by topics.exclude", "mirror", r.name, "topic", tr.Name)
			}
		}
	}
	return errs
}

// syncTopics is the topic discovery task (spec section 8): active mirror topics that
// topics.exclude now matches are stopped (the failover sequence of section 5), and source
// topics matching topics.include, not topics.exclude and not internal (__*), that no
// mirror holds yet, are started with their source configs. A stopped topic keeps its
// mirror association and is therefore never rediscovered; neither is a source topic that
// the source mirrors from this cluster (a loop). syncOnce runs it only while the source
// answers with the mirror's source cluster ID (otherwise only stopExcluded).
func (r *mirrorRT) syncTopics(ctx context.Context, mir *metadata.Mirror, src *source, cfg *mirrorConfig) error {
	im := r.m.local.Metadata().Image()
	errs := r.stopExcluded(ctx, im, cfg)
	if len(cfg.include) > 0 {
		all, err := src.metadata(ctx, nil)
		if err != nil {
			return fmt.Errorf("list the source topics: %w", err)
		}
		var found []string
		for name := range all.topics {
			if !matchAny(cfg.include, name) || matchAny(cfg.exclude, name) || isInternal(name) {
				continue
			}
			if _, ok := im.Topics[name]; ok {
				continue // mirrored (or stopped: not rediscovered), or a local topic never taken over silently
			}
			found = append(found, name)
		}
		sort.Strings(found)
		if len(found) > 0 {
			// A topic the source mirrors from this cluster (e.g. deleted here after a
			// switchover while the other side still mirrors it) would make a loop.
			loops, err := src.loopTopics(ctx, r.m.local.ClusterID())
			if err != nil {
				return fmt.Errorf("ask the source which topics it mirrors from this cluster: %w", err)
			}
			kept := found[:0]
			for _, name := range found {
				if loops[name] == "" {
					kept = append(kept, name)
				}
			}
			found = kept
		}
		if len(found) > 0 {
			configs := r.m.creationConfigs(ctx, src, cfg, found)
			for _, name := range found {
				if err := r.m.startTopic(ctx, mir.Name, all.topics[name], configs[name]); err != nil {
					errs = append(errs, fmt.Sprintf("start discovered topic %s: %v", name, err))
				} else {
					r.m.log.Info("mirror: started discovered topic", "mirror", r.name, "topic", name)
				}
			}
			// no reconcile here: the topic records just applied trigger it through the
			// metadata subscription, and calling it from syncLoop could make it stop this
			// very runner (mirror deleted meanwhile) and wait for syncLoop forever
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
