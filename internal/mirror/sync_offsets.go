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

// syncSourceOffsets is the source-offsets task (TaskSourceOffsets). It keeps the lag of
// spec section 13 (source HW − destination LEO, in records, reported by
// DescribeClusterMirrors, `kmirror mirrors --describe` and
// kmirror_mirror_partition_lag_records) true for the mirror's partitions that are not
// fetched (unfetchedState): without it their source HW stayed at the last fetch response
// while the source moved on, so a paused or FAILED partition read "lag 0" although
// acknowledged source records were never mirrored — the figure an operator reads as the
// data loss of a failover. It runs with the metadata sync (spec section 9), every
// mirror.metadata.refresh.interval.ms, and copies nothing: the source's offsets are only
// read, so a PAUSED topic still gets no metadata sync in the sense of spec section 4.
//
// One Metadata request checks that each source topic is still the one mirrored (same
// topic ID, as the runner's refresh does), then one ListOffsets request (kadm
// ListEndOffsets: timestamp latest, READ_UNCOMMITTED, so the answer is the high
// watermark, an offset, the same figure a fetch response carries) is sent to the
// partitions' source leaders. A partition whose source topic or partition is gone, or
// whose topic was recreated with another topic ID, keeps its value (the runner fails it
// and says why); so does every partition when a request fails, and the task reports the
// failure. A partition that started fetching while the request was out keeps what its
// fetches store.
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
