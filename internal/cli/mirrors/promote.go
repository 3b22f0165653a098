package mirrorscli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// promoteSyncTasks are the sync tasks whose final run --promote waits for (spec §15:
// config sync and group-offset sync current).
var promoteSyncTasks = []string{"topic-configs", "group-offsets"}

// promoteWait bounds --promote's wait for the final sync runs (a few refresh intervals).
const promoteWait = 2 * time.Minute

// promoteCheck is one look at the topics to promote: their partitions, the records a
// failover would lose now, why promoting must be refused (empty: it may go on) and the
// sync tasks' last runs.
type promoteCheck struct {
	partitions int
	states     map[string]int // partitions per state
	unknown    int            // partitions of unknown lag
	missing    []string       // topics asked for that the mirror does not hold
	lag        int64          // known lag summed: what a failover now would lose
	source     map[string]int64
	problems   []string
	tasks      map[string]mirrorproto.DescribeClusterMirrorsSyncTask
}

// checkPromote describes the mirror and checks topics: every partition MIRRORING at lag 0
// (destination LEO = source HW), and each sync task of promoteSyncTasks with a last
// success later than its last error.
func (r *runner) checkPromote(ctx context.Context, topics map[string]bool) (*promoteCheck, error) {
	dr, err := r.describeMirrors(ctx, []string{r.o.mirror})
	if err != nil {
		return nil, err
	}
	c := &promoteCheck{source: map[string]int64{}, states: map[string]int{}, tasks: map[string]mirrorproto.DescribeClusterMirrorsSyncTask{}}
	seen := map[string]bool{}
	for _, m := range dr.Mirrors {
		for _, st := range m.SyncTasks {
			c.tasks[st.Task] = st
		}
		for _, t := range m.Topics {
			if !topics[t.TopicName] {
				continue
			}
			seen[t.TopicName] = true
			for _, p := range t.Partitions {
				c.partitions++
				key := fmt.Sprintf("%s-%d", t.TopicName, p.PartitionIndex)
				c.source[key] = p.SourceOffset
				c.states[p.State.String()]++
				if p.Lag > 0 {
					c.lag += p.Lag
				} else if p.Lag < 0 {
					c.unknown++
				}
				switch {
				case p.State != mirrorproto.StateMirroring:
					c.problems = append(c.problems, fmt.Sprintf("%s is %s, not MIRRORING", key, p.State))
				case p.Lag != 0 || p.SourceOffset < 0 || p.DestinationOffset != p.SourceOffset:
					c.problems = append(c.problems, fmt.Sprintf("%s has LAG %s (source offset %d, destination offset %d)", key, lagText(p.Lag), p.SourceOffset, p.DestinationOffset))
				}
			}
		}
	}
	var missing []string
	for t := range topics {
		if !seen[t] {
			missing = append(missing, t)
		}
	}
	sort.Strings(missing)
	c.missing = missing
	for _, t := range missing {
		c.problems = append(c.problems, fmt.Sprintf("%s is not a topic of mirror %s", t, r.o.mirror))
	}
	for _, name := range promoteSyncTasks {
		st, ok := c.tasks[name]
		switch {
		case !ok || st.LastSuccessMs < 0:
			c.problems = append(c.problems, fmt.Sprintf("the %s sync task has not succeeded yet", name))
		case st.LastErrorMs > st.LastSuccessMs:
			c.problems = append(c.problems, fmt.Sprintf("the %s sync task is behind: its last run failed (%s)", name, deref(st.LastError)))
		}
	}
	return c, nil
}

func lagText(lag int64) string {
	if lag < 0 {
		return "unknown"
	}
	return fmt.Sprint(lag)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// promote is --promote (spec §15), a planned switchover of --topics: it refuses unless
// every partition is MIRRORING at LAG 0 and the topic-configs and group-offsets sync
// tasks are current, waits for one more run of each (the final sync), checks that no
// record arrived meanwhile, then stops the topics (StopMirrorTopics): zero records lost.
// With --dry-run it describes and says what it would do, and changes nothing.
func (r *runner) promote(ctx context.Context) error {
	names, err := r.expandTopics(ctx)
	if err != nil {
		return err
	}
	topics := map[string]bool{}
	var list []string
	for _, n := range names {
		topics[n.TopicName] = true
		list = append(list, n.TopicName)
	}
	c, err := r.checkPromote(ctx, topics)
	if err != nil {
		return err
	}
	w := r.out
	fmt.Fprintf(w, "Promote of mirror %s on %s: topics %s, %d partitions, LAG %d in total (a failover now would lose %d records).\n",
		r.o.mirror, r.o.bootstrap, strings.Join(list, ","), c.partitions, c.lag, c.lag)
	if r.o.dryRun {
		if len(c.problems) > 0 {
			fmt.Fprintf(w, "Dry run: --promote would refuse: %s.\n", strings.Join(c.problems, "; "))
		} else {
			fmt.Fprintf(w, "Dry run: --promote would wait for a final run of the %s sync tasks, check LAG 0 again, then send StopMirrorTopics for %s (they become writable). Nothing was changed.\n",
				strings.Join(promoteSyncTasks, " and "), strings.Join(list, ","))
		}
		return nil
	}
	if len(c.problems) > 0 {
		return fmt.Errorf("refusing to promote: %s (stop the producers and wait for LAG 0; --describe shows the partitions and sync tasks)", strings.Join(c.problems, "; "))
	}
	fmt.Fprintf(w, "Every partition is MIRRORING at LAG 0; waiting for a final run of the %s sync tasks ...\n", strings.Join(promoteSyncTasks, " and "))
	// The final sync is the second run of each task that succeeds after the check: the
	// first may have started before it (and read a destination log end below the one
	// checked); runs of a task are sequential, so the second started after the check.
	deadline := time.Now().Add(promoteWait)
	final := c
	runs := map[string]int{}
	last := map[string]int64{}
	for _, name := range promoteSyncTasks {
		last[name] = c.tasks[name].LastSuccessMs
	}
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
		if final, err = r.checkPromote(ctx, topics); err != nil {
			return err
		}
		done := true
		for _, name := range promoteSyncTasks {
			now := final.tasks[name]
			if now.LastErrorMs > c.tasks[name].LastErrorMs {
				return fmt.Errorf("refusing to promote: the final run of the %s sync task failed: %s", name, deref(now.LastError))
			}
			if now.LastSuccessMs > last[name] {
				runs[name]++
				last[name] = now.LastSuccessMs
			}
			if runs[name] < 2 {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("refusing to promote: no final run of the %s sync tasks within %s", strings.Join(promoteSyncTasks, " and "), promoteWait)
		}
	}
	if len(final.problems) > 0 {
		return fmt.Errorf("refusing to promote: %s", strings.Join(final.problems, "; "))
	}
	var moved []string
	for k, off := range final.source {
		if c.source[k] != off {
			moved = append(moved, fmt.Sprintf("%s %d → %d", k, c.source[k], off))
		}
	}
	if len(moved) > 0 {
		sort.Strings(moved)
		return errors.New("refusing to promote: records were produced on the source meanwhile (" + strings.Join(moved, ", ") + "): stop the producers first")
	}
	req := mirrorproto.NewStopMirrorTopicsRequest()
	req.MirrorName = r.o.mirror
	req.Topics = names
	resp, err := r.request(ctx, req)
	if err != nil {
		return err
	}
	sr := resp.(*mirrorproto.StopMirrorTopicsResponse)
	if err := r.topicResults(sr.ErrorCode, sr.ErrorMessage, sr.Topics, "Stopped mirroring"); err != nil {
		return err
	}
	fmt.Fprintf(w, "Promoted: %s are writable on %s with 0 records lost; move the clients there.\n", strings.Join(list, ","), r.o.bootstrap)
	return nil
}

// stopDryRun is --stop --dry-run: one DescribeClusterMirrors, then the topics the stop
// would fail over, their partitions and states, and the records a failover now would
// lose (their LAG); it changes nothing.
func (r *runner) stopDryRun(ctx context.Context) error {
	names, err := r.expandTopics(ctx)
	if err != nil {
		return err
	}
	topics := map[string]bool{}
	var list []string
	for _, n := range names {
		topics[n.TopicName] = true
		list = append(list, n.TopicName)
	}
	c, err := r.checkPromote(ctx, topics)
	if err != nil {
		return err
	}
	states := make([]string, 0, len(c.states))
	for st, n := range c.states {
		states = append(states, fmt.Sprintf("%d %s", n, st))
	}
	sort.Strings(states)
	fmt.Fprintf(r.out, "Dry run: --stop would fail over %s of mirror %s on %s: %d partitions (%s); a failover now would lose %d records (their LAG)",
		strings.Join(list, ","), r.o.mirror, r.o.bootstrap, c.partitions, strings.Join(states, ", "), c.lag)
	if c.unknown > 0 {
		fmt.Fprintf(r.out, " plus the unknown LAG of %d partitions", c.unknown)
	}
	if len(c.missing) > 0 {
		fmt.Fprintf(r.out, "; not topics of mirror %s (the stop would refuse them): %s", r.o.mirror, strings.Join(c.missing, ","))
	}
	fmt.Fprintln(r.out, ". Nothing was changed.")
	return nil
}
