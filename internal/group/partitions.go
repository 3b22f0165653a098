package group

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/internal/record"
)

// partState is the state of an elected partition of __consumer_offsets.
type partState int8

const (
	partLoading partState = iota + 1 // being replayed: its groups get COORDINATOR_LOAD_IN_PROGRESS
	partLoaded                       // served
	partFailed                       // the load failed: NOT_COORDINATOR until elected again
)

// partition is one elected partition of __consumer_offsets.
type partition struct {
	state     partState // guarded by Coordinator.mu
	epoch     int32     // leader epoch of the election
	err       error     // why the load failed (partFailed)
	done      chan struct{}
	abandoned atomic.Bool // resigned or closed while loading: the load gives up
}

// errAbandoned stops a load whose partition was resigned (or the coordinator closed).
var errAbandoned = errors.New("group: load abandoned")

// partitionStatusLocked is the error for a group of partition p: 0 when loaded,
// COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR otherwise. The caller
// holds mu.
func (c *Coordinator) partitionStatusLocked(p int32) int16 {
	part := c.parts[p]
	switch {
	case part == nil || part.state == partFailed:
		return errNotCoordinator
	case part.state == partLoading:
		return errCoordinatorLoadInProgress
	}
	return 0
}

// OnElection makes this broker the coordinator of partition p of __consumer_offsets at
// leaderEpoch (Kafka's GroupCoordinator.onElection → GroupMetadataManager
// .scheduleLoadGroupAndOffsets / loadGroupsAndOffsets). The partition is replayed in the
// background; meanwhile its groups get COORDINATOR_LOAD_IN_PROGRESS (SyncGroup:
// REBALANCE_IN_PROGRESS, Heartbeat: NONE), then they are served. Loads of different
// partitions run independently and never block requests for other partitions. An
// election with an epoch below the highest one seen for p, or not above that of the
// latest resignation of p, is stale and ignored (Kafka's maybeUpdateCoordinatorEpoch);
// one for a partition already loaded or loading only records the epoch. A load that
// fails leaves the partition unowned (NOT_COORDINATOR) until elected again; AwaitLoaded
// reports the error.
func (c *Coordinator) OnElection(p int32, leaderEpoch int32) {
	if p < 0 || p >= c.opts.NumPartitions {
		c.log.Warn("ignoring an election for a partition out of range", "partition", p, "partitions", c.opts.NumPartitions)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return
	}
	if cur, ok := c.epochs[p]; ok && leaderEpoch < cur {
		c.log.Info("ignoring a stale election", "partition", p, "epoch", leaderEpoch, "current_epoch", cur)
		return
	}
	if r, ok := c.resigned[p]; ok && leaderEpoch <= r {
		c.log.Info("ignoring an election not newer than the latest resignation", "partition", p, "epoch", leaderEpoch, "resigned_epoch", r)
		return
	}
	c.epochs[p] = leaderEpoch
	if part := c.parts[p]; part != nil && part.state != partFailed {
		part.epoch = leaderEpoch
		return
	}
	part := &partition{state: partLoading, epoch: leaderEpoch, done: make(chan struct{})}
	c.parts[p] = part
	if !c.expiryOn {
		c.expiryOn = true
		go c.expiryLoop()
	}
	c.log.Info("elected as the group coordinator of a partition; loading it", "partition", p, "epoch", leaderEpoch)
	c.loads.Add(1)
	go c.load(p, part)
}

// OnResignation stops this broker coordinating partition p of __consumer_offsets
// (Kafka's GroupCoordinator.onResignation → removeGroupsForPartition): a load in
// progress is abandoned, and every group of p is unloaded — it becomes Dead in memory
// (nothing is written), members waiting in JoinGroup or SyncGroup are answered
// NOT_COORDINATOR, heartbeat and rebalance timers stop — so that later requests for
// these groups get NOT_COORDINATOR. leaderEpoch is the partition's new leader epoch; a
// resignation with an epoch below the highest one seen is stale and ignored; a negative
// epoch (unknown, e.g. the partition was deleted) always applies.
func (c *Coordinator) OnResignation(p int32, leaderEpoch int32) {
	c.mu.Lock()
	if leaderEpoch >= 0 {
		if cur, ok := c.epochs[p]; ok && leaderEpoch < cur {
			c.mu.Unlock()
			c.log.Info("ignoring a stale resignation", "partition", p, "epoch", leaderEpoch, "current_epoch", cur)
			return
		}
		c.epochs[p] = leaderEpoch
		c.resigned[p] = leaderEpoch
	}
	if part := c.parts[p]; part != nil {
		part.abandoned.Store(true)
		delete(c.parts, p)
	}
	delete(c.logs, p)
	var unload []*group
	for id, g := range c.groups {
		if g.partition == p {
			unload = append(unload, g)
			delete(c.groups, id)
		}
	}
	for pid, ids := range c.txnOpen {
		for id := range ids {
			if c.PartitionFor(id) == p {
				c.dropOpenTxnLocked(pid, id)
			}
		}
	}
	c.mu.Unlock()
	for _, g := range unload {
		c.unloadGroup(g)
	}
	c.log.Info("resigned as the group coordinator of a partition", "partition", p, "epoch", leaderEpoch, "groups_unloaded", len(unload))
}

// AwaitLoaded waits until no elected partition is loading, then returns the errors of
// the partitions whose load failed (nil when every elected partition is loaded), or
// ctx's error. A one-node cluster calls it after electing every partition at start,
// so that it serves groups and offsets as soon as it accepts connections.
func (c *Coordinator) AwaitLoaded(ctx context.Context) error {
	for {
		c.mu.Lock()
		var wait []chan struct{}
		var errs []error
		for _, part := range c.parts {
			switch part.state {
			case partLoading:
				wait = append(wait, part.done)
			case partFailed:
				errs = append(errs, part.err)
			}
		}
		c.mu.Unlock()
		if len(wait) == 0 {
			return errors.Join(errs...)
		}
		for _, ch := range wait {
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// unloadGroup is GroupCoordinator.onGroupUnloaded: the group becomes Dead in memory and
// its waiting members are answered NOT_COORDINATOR; nothing is written.
func (c *Coordinator) unloadGroup(g *group) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.transition(Dead)
	g.stopTimers()
	for _, m := range g.members {
		m.stopTimer()
		g.invokeJoin(m, joinResult{err: errNotCoordinator, memberID: m.id})
		g.invokeSync(m, nil, errNotCoordinator)
	}
}

// load replays partition p (GroupMetadataManager.doLoadGroupsAndOffsets) and installs
// its groups, unless the partition was resigned meanwhile. The scan continues until it
// reaches the log end offset checked under mu: a transaction marker appended during the
// load (CompleteTxn is ignored while loading) is thus always replayed.
func (c *Coordinator) load(p int32, part *partition) {
	defer c.loads.Done()
	defer close(part.done)
	start := time.Now()
	fail := func(err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.parts[p] != part {
			return
		}
		if errors.Is(err, errAbandoned) {
			delete(c.parts, p)
			return
		}
		part.state, part.err = partFailed, fmt.Errorf("group: load %s-%d: %w", TopicName, p, err)
		c.log.Error("loading a partition of "+TopicName+" failed; it is not coordinated until elected again", "partition", p, "err", err)
	}
	l, err := c.partitionLog(p)
	if err != nil {
		fail(err)
		return
	}
	st := newLoadState()
	apply := func(b record.Batch) error {
		if part.abandoned.Load() {
			return errAbandoned
		}
		return st.apply(b)
	}
	var next int64
	for {
		leo := l.LogEndOffset()
		if next, err = l.Scan(next, apply); err != nil {
			fail(err)
			return
		}
		if next < leo {
			fail(fmt.Errorf("the scan stopped at offset %d, below the log end offset %d", next, leo))
			return
		}
		c.mu.Lock()
		if c.parts[p] != part || part.abandoned.Load() {
			c.mu.Unlock()
			return
		}
		if l.LogEndOffset() > next {
			c.mu.Unlock()
			continue
		}
		groups, open := st.build(c)
		for id, g := range groups {
			c.groups[id] = g
		}
		for pid, ids := range open {
			for _, id := range ids {
				c.addOpenTxnLocked(pid, id)
			}
		}
		part.state = partLoaded
		epoch := part.epoch
		c.mu.Unlock()
		if st.skipped > 0 {
			c.log.Warn(fmt.Sprintf("skipped %d undecodable or unsupported records while loading %s-%d", st.skipped, TopicName, p))
		}
		now := nowMs()
		for _, g := range groups {
			c.onGroupLoaded(g, now)
		}
		c.log.Info("loaded group metadata", "partition", p, "epoch", epoch, "groups", len(groups), "ms", time.Since(start).Milliseconds())
		return
	}
}

// onGroupLoaded is GroupCoordinator.onGroupLoaded: every loaded member must heartbeat
// within its session timeout.
func (c *Coordinator) onGroupLoaded(g *group, now int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.is(Dead) {
		return // resigned meanwhile
	}
	for _, m := range g.members {
		m.latestHeartbeat = now
		c.scheduleHeartbeat(g, m, time.Duration(m.sessionTimeoutMs)*time.Millisecond)
	}
	if int64(len(g.members)) > int64(c.opts.GroupMaxSize) {
		c.prepareRebalance(g, "loaded group is over capacity")
	}
}

// addOpenTxnLocked records that producer pid has pending transactional offsets in group
// id (Kafka's addProducerGroup). The caller holds mu.
func (c *Coordinator) addOpenTxnLocked(pid int64, id string) {
	ids := c.txnOpen[pid]
	if ids == nil {
		ids = make(map[string]bool)
		c.txnOpen[pid] = ids
	}
	ids[id] = true
}

// dropOpenTxnLocked is Kafka's removeProducerGroup. The caller holds mu.
func (c *Coordinator) dropOpenTxnLocked(pid int64, id string) {
	if ids := c.txnOpen[pid]; ids != nil {
		delete(ids, id)
		if len(ids) == 0 {
			delete(c.txnOpen, pid)
		}
	}
}
