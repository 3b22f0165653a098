package mirror

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// unfetchedState reports the partition states whose source HW no fetch refreshes, so that
// the source-offsets task asks the source for it: PAUSING and PAUSED (the fetcher is
// removed, spec section 4), FAILED (waiting for a retry, out of retries or
// non-retryable), LOG_ALIGNMENT (not fetching yet, possibly waiting for a source that
// does not answer) and UNKNOWN (not started yet). MIRRORING partitions take the HW from
// every fetch response, and EPOCH_FENCING and ULE_RECOVERY are steps of MIRRORING that
// return to it at once. STOPPING and STOPPED partitions are no longer mirrors: they keep
// the last value, the primary's HW as of the failover (docs/operations.md, section 2).
func unfetchedState(s mirrorproto.State) bool {
	switch s {
	case mirrorproto.StatePaused, mirrorproto.StatePausing, mirrorproto.StateFailed,
		mirrorproto.StateLogAlignment, mirrorproto.StateUnknown:
		return true
	}
	return false
}

// syncSourceOffsets is the source-offsets task (TaskSourceOffsets): it keeps the lag of
// spec section 13 (source HW − destination LEO, records) true for partitions no fetch
// refreshes (unfetchedState) — otherwise a paused or FAILED partition reads "lag 0" while
// the source moves on, the figure an operator takes for a failover's data loss. Every
// mirror.metadata.refresh.interval.ms: one Metadata request (the source topic ID must
// still match) and one ListOffsets (kadm ListEndOffsets: latest, READ_UNCOMMITTED, the
// HW). A partition whose source topic is gone or recreated keeps its value (the runner
// fails it), as does every partition when a request fails (the task reports it); one that
// started fetching meanwhile keeps what its fetches store. It copies nothing.
func (r *mirrorRT) syncSourceOffsets(ctx context.Context, src *source) error {
	im := r.m.local.Metadata().Image()
	byTopic := map[string][]*partition{}
	for _, p := range r.m.partitionsOf(r.name) {
		if !unfetchedState(p.state()) {
			continue
		}
		if t := im.Topics[p.topic]; t == nil || t.Mirror == nil || t.ID != p.topicID {
			continue // deleted or recreated locally: reconcile drops the partition
		}
		byTopic[p.topic] = append(byTopic[p.topic], p)
	}
	if len(byTopic) == 0 {
		return nil
	}
	names := make([]string, 0, len(byTopic))
	for name := range byTopic {
		names = append(names, name)
	}
	sort.Strings(names)
	meta, err := src.metadata(ctx, names)
	if err != nil {
		return fmt.Errorf("source metadata: %w", err)
	}
	asked := make([]string, 0, len(names))
	for _, name := range names {
		st := meta.topics[name]
		if st == nil {
			continue // gone on the source: the runner fails the partitions
		}
		want := im.Topics[name].Mirror.SourceTopicID
		if st.id != (metadata.TopicID{}) && want != (metadata.TopicID{}) && st.id != want {
			continue // recreated: another topic's offsets say nothing about this mirror
		}
		asked = append(asked, name)
	}
	if len(asked) == 0 {
		return nil
	}
	listed, err := kadm.NewClient(src.cl).ListEndOffsets(ctx, asked...)
	if err != nil && len(listed) == 0 {
		return fmt.Errorf("ListOffsets on the source: %w", err)
	}
	var errs []string
	if err != nil {
		errs = append(errs, err.Error()) // some leaders did not answer
	}
	for _, name := range asked {
		for _, p := range byTopic[name] {
			lo, ok := listed.Lookup(name, p.index)
			if !ok {
				continue // no such source partition, or its leader did not answer
			}
			if lo.Err != nil {
				if !errors.Is(lo.Err, kerr.UnknownTopicOrPartition) && !errors.Is(lo.Err, kerr.UnknownTopicID) {
					errs = append(errs, fmt.Sprintf("%s: %v", p, lo.Err))
				}
				continue
			}
			if lo.Offset < 0 {
				continue
			}
			p.mu.Lock()
			// applyFetch stores under mu in MIRRORING only: a partition resumed
			// meanwhile keeps the fresher figure of its fetches
			if unfetchedState(p.st.State) {
				p.sourceHW.Store(lo.Offset)
			}
			p.mu.Unlock()
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ListOffsets on the source: %s", strings.Join(errs, "; "))
	}
	return nil
}
