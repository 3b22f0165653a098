package mirror

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	replica "github.com/kmirror/kmirror/internal/partition"
)

// syncGroupOffsets is the consumer group offset task (spec section 9). It lists the
// source's groups (ListGroups), keeps those matching groups.include and not
// groups.exclude, fetches their committed offsets (OffsetFetch) and, for partitions of
// this mirror that are MIRRORING, writes them to the local group coordinator:
//
//   - a group active on the destination (any state but Empty) is skipped with a warning;
//     an Empty or absent group is synced;
//   - an offset is clamped to [destination log start, destination LEO]; a clamped offset
//     takes its leader epoch from the destination epoch cache, an unclamped one keeps the
//     source's (mirrored batches keep their source epochs);
//   - metadata strings are copied; offset 0 is synced like any other (spec section 16);
//   - only offsets that differ from the destination's are written.
//
// Partitions in any other state (a STOPPED topic in particular) are left alone, so
// offsets synced before a failover stay. Share groups are skipped.
func (r *mirrorRT) syncGroupOffsets(ctx context.Context, src *source, cfg *mirrorConfig) error {
	coord := r.m.local.Groups()
	if coord == nil {
		return nil
	}
	mirroring := r.mirroringPartitions()
	if len(mirroring) == 0 {
		return nil
	}
	adm := kadm.NewClient(src.cl)
	listed, err := adm.ListGroups(ctx)
	if err != nil && len(listed) == 0 {
		return fmt.Errorf("ListGroups on the source: %w", err)
	}
	listErr := err
	var ids []string
	for id, lg := range listed {
		if lg.GroupType == "share" || lg.ProtocolType == "share" {
			continue // share groups: not synced (kmirror has none)
		}
		if !matchAny(cfg.groupsInclude, id) || matchAny(cfg.groupsExclude, id) {
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return listErr
	}
	fetched := adm.FetchManyOffsets(ctx, ids...)
	var errs []string
	if listErr != nil {
		errs = append(errs, "ListGroups on the source: "+listErr.Error())
	}
	for _, id := range ids {
		fr, ok := fetched[id]
		if !ok {
			continue
		}
		if fr.Err != nil {
			errs = append(errs, fmt.Sprintf("OffsetFetch %s: %v", id, fr.Err))
			continue
		}
		if err := r.syncGroup(ctx, coord, id, fr.Fetched, mirroring); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// activeOnDestination reports a group state in which the destination group owns its
// offsets (spec section 9: Stable, PreparingRebalance, CompletingRebalance, ...).
func activeOnDestination(state string, exists bool) bool {
	return exists && state != "Empty" && state != "Dead"
}

// mirroringPartitions are the partitions of this mirror that are MIRRORING: those this
// broker leads by their state, the others by their persisted state at their coordinator
// (the group offset task runs on the mirror's coordinator, whichever broker leads them).
func (r *mirrorRT) mirroringPartitions() map[kafka.TopicPartition]bool {
	out := map[kafka.TopicPartition]bool{}
	im := r.m.local.Metadata().Image()
	for _, t := range im.MirrorTopics(r.name) {
		if t.Mirror.Desired != metadata.DesiredMirroring {
			continue
		}
		for i, st := range r.m.clusterStates(r.ctx, t) {
			if st == mirrorproto.StateMirroring {
				out[kafka.TopicPartition{Topic: t.Name, Partition: int32(i)}] = true
			}
		}
	}
	return out
}

// syncGroup writes one group's source offsets to its coordinator on this cluster.
func (r *mirrorRT) syncGroup(ctx context.Context, coord group.Access, id string, fetched kadm.OffsetResponses, mirroring map[kafka.TopicPartition]bool) error {
	state, exists, err := coord.GroupState(ctx, id)
	if err != nil {
		return fmt.Errorf("describe group %s on this cluster: %w", id, err)
	}
	if activeOnDestination(state, exists) {
		if r.warnedActive[id] != state {
			r.warnedActive[id] = state
			r.m.log.Warn("mirror: group is active on the destination, its offsets are not synced", "mirror", r.name, "group", id, "state", state)
		}
		return nil
	}
	delete(r.warnedActive, id)
	cur, err := coord.CommittedOffsets(ctx, id)
	if err != nil {
		return fmt.Errorf("fetch the offsets of group %s on this cluster: %w", id, err)
	}
	out := map[string]map[int32]group.Offset{}
	n := 0
	for topic, parts := range fetched {
		for part, o := range parts {
			if o.Err != nil || o.At < 0 || !mirroring[kafka.TopicPartition{Topic: topic, Partition: part}] {
				continue
			}
			bounds, err := r.m.local.Bounds(ctx, topic, part)
			if err != nil {
				continue
			}
			want := clampOffset(bounds, o.At, o.LeaderEpoch)
			want.Metadata = o.Metadata
			if have, ok := cur[topic][part]; ok && have.Offset == want.Offset && have.LeaderEpoch == want.LeaderEpoch && have.Metadata == want.Metadata {
				continue
			}
			if out[topic] == nil {
				out[topic] = map[int32]group.Offset{}
			}
			out[topic][part] = want
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if err := coord.SyncOffsets(ctx, id, out); err != nil {
		if st, ex, _ := coord.GroupState(ctx, id); activeOnDestination(st, ex) {
			return nil // became active meanwhile: its own offsets win
		}
		return fmt.Errorf("write offsets of group %s: %w", id, err)
	}
	r.m.log.Debug("mirror: group offsets synced", "mirror", r.name, "group", id, "partitions", n)
	return nil
}

// clampOffset clamps a source committed offset to [log start, LEO] of the destination
// log; a clamped offset takes the leader epoch of the epoch-cache entry covering it (the
// latest entry starting at or before it), an unclamped one keeps epoch.
func clampOffset(b replica.Bounds, offset int64, epoch int32) group.Offset {
	switch {
	case offset < b.LogStart:
		return group.Offset{Offset: b.LogStart, LeaderEpoch: b.LogStartEpoch}
	case offset > b.LogEnd:
		return group.Offset{Offset: b.LogEnd, LeaderEpoch: b.LogEndEpoch}
	}
	return group.Offset{Offset: offset, LeaderEpoch: epoch}
}
