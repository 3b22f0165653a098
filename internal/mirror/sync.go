package mirror

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// The periodic metadata sync tasks of a mirror (spec sections 8, 9 and 13), each run
// every mirror.metadata.refresh.interval.ms. A failing task is counted and logged (at
// WARN on a change, syncStatus.record); it never stops mirroring or the other tasks.
const (
	// TaskSourceMetadata is the source metadata refresh of the mirror's runner: source
	// cluster ID check, topic deletion and recreation, partition growth, leaders.
	TaskSourceMetadata = "source-metadata"
	// TaskTopicDiscovery starts new source topics matching topics.include and stops
	// mirror topics that became excluded by topics.exclude.
	TaskTopicDiscovery = "topic-discovery"
	// TaskTopicConfigs copies the source topics' explicitly set configs.
	TaskTopicConfigs = "topic-configs"
	// TaskGroupOffsets copies the committed offsets of the source's consumer groups.
	TaskGroupOffsets = "group-offsets"
	// TaskACLs copies the source's ACL bindings selected by acls.include (sync_acls.go).
	TaskACLs = "acls"
	// TaskSourceOffsets reads the source high watermark of the mirror partitions that no
	// fetch refreshes (PAUSED, FAILED, ...), so that their lag stays true (spec section
	// 13; sync_offsets.go). It copies nothing.
	TaskSourceOffsets = "source-offsets"
)

// syncTasks lists the tasks in the order they are reported.
var syncTasks = []string{TaskSourceMetadata, TaskTopicDiscovery, TaskTopicConfigs, TaskGroupOffsets, TaskACLs, TaskSourceOffsets}

// taskStatus is what describe reports of one task.
type taskStatus struct {
	lastSuccess time.Time
	lastErrorAt time.Time
	lastError   string
	errors      int64
	loggedAt    time.Time // last failure logged at WARN
}

// failureLogEvery is how often a task failing with the same error is logged at WARN again
// (a source outage fails every task on every refresh; describe and the metrics count them
// all).
const failureLogEvery = 5 * time.Minute

// syncStatus holds the status of every task of one mirror; safe for concurrent use.
type syncStatus struct {
	mu    sync.Mutex
	tasks map[string]*taskStatus
}

func newSyncStatus() *syncStatus {
	s := &syncStatus{tasks: map[string]*taskStatus{}}
	for _, t := range syncTasks {
		s.tasks[t] = &taskStatus{}
	}
	return s
}

// record notes the outcome of one run of task.
// It returns whether to log the outcome: a failure after a success, a failure with
// another error than the last one, the same failure failureLogEvery after it was last
// logged, and the first success after failures (logged at INFO by the caller).
func (s *syncStatus) record(task string, err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.tasks[task]
	now := time.Now()
	failing := st.lastErrorAt.After(st.lastSuccess)
	if err == nil {
		st.lastSuccess = now
		return failing
	}
	msg := oneLine(err.Error())
	log := !failing || msg != st.lastError || now.Sub(st.loggedAt) >= failureLogEvery
	st.lastErrorAt, st.lastError = now, msg
	st.errors++
	if log {
		st.loggedAt = now
	}
	return log
}

// report records the outcome of one run of task and logs it: WARN and INFO when
// syncStatus.record says so, DEBUG for a failure repeated in between.
func (r *mirrorRT) report(task string, err error) {
	switch logIt := r.status.record(task, err); {
	case err != nil && logIt:
		r.m.log.Warn("mirror sync task failed", "mirror", r.name, "task", task, "err", err)
	case err != nil:
		r.m.log.Debug("mirror sync task failed again", "mirror", r.name, "task", task, "err", err)
	case logIt:
		r.m.log.Info("mirror sync task succeeded again", "mirror", r.name, "task", task)
	}
}

// snapshot returns the status of every task for DescribeClusterMirrors.
func (s *syncStatus) snapshot() []mirrorproto.DescribeClusterMirrorsSyncTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return -1
		}
		return t.UnixMilli()
	}
	out := make([]mirrorproto.DescribeClusterMirrorsSyncTask, 0, len(syncTasks))
	for _, name := range syncTasks {
		st := s.tasks[name]
		t := mirrorproto.DescribeClusterMirrorsSyncTask{Task: name, LastSuccessMs: ms(st.lastSuccess),
			LastErrorMs: ms(st.lastErrorAt), ErrorCount: st.errors}
		if st.lastError != "" {
			t.LastError = strp(st.lastError)
		}
		out = append(out, t)
	}
	return out
}

// syncLoop runs the sync tasks of the mirror every refresh interval until the runner
// stops. It runs beside the runner goroutine so that a slow or unreachable source never
// delays the partition state machine.
func (r *mirrorRT) syncLoop() {
	defer close(r.syncDone)
	every := time.Duration(r.m.config().RefreshIntervalMs) * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		r.syncOnce()
		if d := time.Duration(r.m.config().RefreshIntervalMs) * time.Millisecond; d != every {
			every = d // mirror.metadata.refresh.interval.ms changed dynamically
			t.Reset(every)
		}
	}
}

// isCoordinator reports whether this broker is the mirror's coordinator: the leader of
// the __mirror_state partition of its name (cluster.md §3), which runs the cluster-wide
// sync tasks (topic discovery, topic configs, group offsets) once for the whole cluster.
func (r *mirrorRT) isCoordinator() bool {
	p := r.m.store.partitionFor([]byte(r.name))
	return p >= 0 && r.m.store.coordinatorOf(p) == r.m.local.NodeID()
}

// syncOnce runs the sync tasks once: on the mirror's coordinator all of them, elsewhere
// the source-offsets task only (for the partitions this broker leads).
func (r *mirrorRT) syncOnce() {
	mir, ok := r.m.local.Metadata().Image().Mirrors[r.name]
	cfg, src := r.cfgSnapshot(), r.sourceSnapshot()
	if !ok || cfg == nil || src == nil {
		return // not connected yet: the runner reports why
	}
	coordinator := r.isCoordinator()
	run := func(task string, fn func(ctx context.Context) error) {
		if r.ctx.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(r.ctx, cfg.requestTimeout)
		defer cancel()
		err := fn(ctx)
		if r.ctx.Err() != nil {
			return // shutting down: not a task failure
		}
		r.report(task, err)
	}
	// Nothing is copied from a cluster that is not the mirror's source (wiped and
	// recreated, or bootstrap.servers pointed elsewhere), nor is its HW taken for the
	// mirror partitions' lag; and a source that does not answer fails every task, so that
	// none reports a success (and no last-success alert stays quiet) through an outage
	// merely because it had nothing to do.
	ctx, cancel := context.WithTimeout(r.ctx, cfg.requestTimeout)
	cid, err := src.clusterID(ctx)
	cancel()
	switch {
	case err != nil:
		err = fmt.Errorf("nothing synced: the source does not answer: %w", err)
	case mir.SourceClusterID != "" && cid != mir.SourceClusterID:
		err = fmt.Errorf("nothing synced: the source cluster ID changed from %s to %s", mir.SourceClusterID, cid)
	}
	if err != nil {
		if coordinator {
			run(TaskTopicDiscovery, func(ctx context.Context) error {
				if errs := r.stopExcluded(ctx, r.m.local.Metadata().Image(), cfg); len(errs) > 0 {
					return fmt.Errorf("%w; %s", err, strings.Join(errs, "; "))
				}
				return err
			})
			for _, task := range []string{TaskTopicConfigs, TaskGroupOffsets, TaskACLs} {
				run(task, func(context.Context) error { return err })
			}
		}
		run(TaskSourceOffsets, func(context.Context) error { return err })
		return
	}
	if coordinator {
		run(TaskTopicDiscovery, func(ctx context.Context) error { return r.syncTopics(ctx, mir, src, cfg) })
		run(TaskTopicConfigs, func(ctx context.Context) error { return r.syncTopicConfigs(ctx, src, cfg) })
		run(TaskGroupOffsets, func(ctx context.Context) error { return r.syncGroupOffsets(ctx, src, cfg) })
		run(TaskACLs, func(ctx context.Context) error { return r.syncACLs(ctx, src, cfg) })
	}
	run(TaskSourceOffsets, func(ctx context.Context) error { return r.syncSourceOffsets(ctx, src) })
}

// activeMirrorTopics returns the mirror's topics whose desired state is in want.
func activeMirrorTopics(im *metadata.Image, mirror string, want ...metadata.DesiredState) []*metadata.Topic {
	var out []*metadata.Topic
	for _, t := range im.MirrorTopics(mirror) {
		for _, d := range want {
			if t.Mirror.Desired == d {
				out = append(out, t)
				break
			}
		}
	}
	return out
}
