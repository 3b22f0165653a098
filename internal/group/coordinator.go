// Package group is the classic consumer-group coordinator: membership (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup), committed offsets (OffsetCommit, OffsetFetch,
// OffsetDelete) and group administration (ListGroups, DescribeGroups, DeleteGroups), with
// durable state in the internal topic __consumer_offsets in Apache Kafka's record formats.
// It follows Apache Kafka's classic GroupCoordinator / GroupMetadataManager
// (core/src/main/scala/kafka/coordinator/group and the group-coordinator module's
// classic/ClassicGroup.java). KIP-848 consumer groups and share groups are not served.
package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"

	"github.com/kmirror/kmirror/internal/record"
)

// TopicName is the internal topic holding group metadata and committed offsets.
const TopicName = "__consumer_offsets"

// MaxGroupIDLen is the longest group ID accepted, in bytes: the record keys of
// __consumer_offsets store it as an int16-length string, so Kafka cannot store a longer
// one either. Longer IDs are answered INVALID_GROUP_ID.
const MaxGroupIDLen = math.MaxInt16

// MaxOffsetMetadataBytes is offset.metadata.max.bytes (4096): a commit whose metadata is
// longer gets OFFSET_METADATA_TOO_LARGE for that partition.
const MaxOffsetMetadataBytes = 4096

// newMemberJoinTimeout is GroupCoordinator.NewMemberJoinTimeoutMs: a new member waiting in
// JoinGroup is removed after 5 minutes.
const newMemberJoinTimeout = 5 * time.Minute

// PartitionLog is one partition of __consumer_offsets as the coordinator needs it; the
// broker supplies it over its real partition log (internal/storage).
type PartitionLog interface {
	// Append appends one uncompressed batch holding recs (built with record.Build,
	// producer ID -1), assigning offsets; returns the first offset once the batch is
	// durable and visible.
	Append(recs []record.KV) (int64, error)
	// Scan calls fn for every record from the log start to the LEO, in offset order, for
	// loading at start-up.
	Scan(fn func(offset int64, key, value []byte) error) error
}

// Options configures a Coordinator; zero values take Kafka's defaults (noted per field).
type Options struct {
	NumPartitions                int32 // offsets.topic.num.partitions (50)
	OffsetsRetentionMs           int64 // offsets.retention.minutes*60000 (7 days)
	OffsetsRetentionCheckMs      int64 // offsets.retention.check.interval.ms (600000)
	GroupMinSessionTimeoutMs     int32 // group.min.session.timeout.ms (6000)
	GroupMaxSessionTimeoutMs     int32 // group.max.session.timeout.ms (1800000)
	GroupInitialRebalanceDelayMs int32 // group.initial.rebalance.delay.ms (Kafka default 3000, set by the broker; zero or negative: no delay)
	GroupMaxSize                 int32 // group.max.size (MaxInt32)
	// Log opens partition p of __consumer_offsets.
	Log func(partition int32) (PartitionLog, error)
	// TopicPartitionExists reports whether a topic partition exists (OffsetCommit to a
	// missing one is answered UNKNOWN_TOPIC_OR_PARTITION). Nil accepts every partition.
	TopicPartitionExists func(topic string, partition int32) bool
	Logger               *slog.Logger
}

// Offset is one committed offset of a group, as stored in an OffsetCommitValue.
type Offset struct {
	Offset            int64
	LeaderEpoch       int32 // -1 when unknown
	Metadata          string
	CommitTimestampMs int64
}

// Coordinator is the group coordinator for every partition of __consumer_offsets of this
// broker (single node: all of them). Safe for concurrent use.
type Coordinator struct {
	opts   Options
	log    *slog.Logger
	loaded atomic.Bool
	closed atomic.Bool

	mu     sync.Mutex // guards groups and logs (never held while taking a group's lock)
	groups map[string]*group
	logs   map[int32]PartitionLog

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// New returns a coordinator that answers COORDINATOR_LOAD_IN_PROGRESS until Load is done.
func New(opts Options) *Coordinator {
	if opts.NumPartitions <= 0 {
		opts.NumPartitions = 50
	}
	if opts.OffsetsRetentionMs <= 0 {
		opts.OffsetsRetentionMs = 7 * 24 * 3600 * 1000
	}
	if opts.OffsetsRetentionCheckMs <= 0 {
		opts.OffsetsRetentionCheckMs = 600000
	}
	if opts.GroupMinSessionTimeoutMs <= 0 {
		opts.GroupMinSessionTimeoutMs = 6000
	}
	if opts.GroupMaxSessionTimeoutMs <= 0 {
		opts.GroupMaxSessionTimeoutMs = 1800000
	}
	if opts.GroupInitialRebalanceDelayMs < 0 {
		opts.GroupInitialRebalanceDelayMs = 0
	}
	if opts.GroupMaxSize <= 0 {
		opts.GroupMaxSize = math.MaxInt32
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{
		opts:   opts,
		log:    opts.Logger.With("component", "group-coordinator"),
		groups: make(map[string]*group),
		logs:   make(map[int32]PartitionLog),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
}

// PartitionFor is the __consumer_offsets partition of groupID:
// Utils.abs(groupId.hashCode()) % numPartitions, with Java's String.hashCode over UTF-16
// code units (GroupMetadataManager.partitionFor).
func (c *Coordinator) PartitionFor(groupID string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(groupID)) {
		h = 31*h + int32(u)
	}
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % c.opts.NumPartitions
}

func (c *Coordinator) partitionLog(p int32) (PartitionLog, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.logs[p]; ok {
		return l, nil
	}
	if c.opts.Log == nil {
		return nil, errors.New("group: no __consumer_offsets log configured")
	}
	l, err := c.opts.Log(p)
	if err != nil {
		return nil, fmt.Errorf("group: open %s-%d: %w", TopicName, p, err)
	}
	c.logs[p] = l
	return l, nil
}

// Load replays every partition of __consumer_offsets (later records win, tombstones
// delete), then starts answering requests and the offset expiry loop
// (offsets.retention.check.interval.ms). Until it returns, handlers answer
// COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) Load(ctx context.Context) error {
	st := newLoadState()
	for p := int32(0); p < c.opts.NumPartitions; p++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		l, err := c.partitionLog(p)
		if err != nil {
			return err
		}
		if err := l.Scan(st.apply); err != nil {
			return fmt.Errorf("group: load %s-%d: %w", TopicName, p, err)
		}
	}
	now := nowMs()
	c.mu.Lock()
	for id, g := range st.build(c) {
		c.groups[id] = g
	}
	groups := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		groups = append(groups, g)
	}
	c.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		// GroupCoordinator.onGroupLoaded: every loaded member must heartbeat within its
		// session timeout.
		for _, m := range g.members {
			m.latestHeartbeat = now
			c.scheduleHeartbeat(g, m, time.Duration(m.sessionTimeoutMs)*time.Millisecond)
		}
		if int64(len(g.members)) > int64(c.opts.GroupMaxSize) {
			c.prepareRebalance(g, "loaded group is over capacity")
		}
		g.mu.Unlock()
	}
	c.loaded.Store(true)
	c.log.Info("loaded group metadata", "groups", len(groups))
	go c.expiryLoop()
	return nil
}

// Close stops timers and the expiry loop; members blocked in JoinGroup or SyncGroup are
// answered NOT_COORDINATOR (as on partition emigration), later requests
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.once.Do(func() {
		c.closed.Store(true)
		close(c.stop)
		if c.loaded.Load() {
			<-c.done
		}
		c.mu.Lock()
		groups := make([]*group, 0, len(c.groups))
		for _, g := range c.groups {
			groups = append(groups, g)
		}
		c.mu.Unlock()
		for _, g := range groups {
			g.mu.Lock()
			g.stopTimers()
			for _, m := range g.members {
				m.stopTimer()
				g.invokeJoin(m, joinResult{err: errNotCoordinator})
				g.invokeSync(m, nil, errNotCoordinator)
			}
			g.mu.Unlock()
		}
	})
}

func (c *Coordinator) expiryLoop() {
	defer close(c.done)
	t := time.NewTicker(time.Duration(c.opts.OffsetsRetentionCheckMs) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.expireOffsets(nowMs())
		}
	}
}

// groupStatus is validateGroupStatus: the group-level error for groupID, or 0.
// allowEmpty is true for the APIs where Kafka accepts the empty group ID (OffsetCommit,
// OffsetFetch, DescribeGroups, DeleteGroups, OffsetDelete).
func (c *Coordinator) groupStatus(groupID string, allowEmpty bool) int16 {
	if (!allowEmpty && groupID == "") || len(groupID) > MaxGroupIDLen {
		return errInvalidGroupID
	}
	if c.closed.Load() {
		return errCoordinatorNotAvailable
	}
	if !c.loaded.Load() {
		return errCoordinatorLoadInProgress
	}
	return 0
}

// getGroup returns the group (nil if absent); with create, an absent group is created
// Empty with no protocol type.
func (c *Coordinator) getGroup(groupID string, create bool) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[groupID]
	if g == nil && create {
		g = newGroup(groupID, c.PartitionFor(groupID), nowMs())
		c.groups[groupID] = g
	}
	return g
}

// removeGroup drops a Dead group from the map (called with g.mu held).
func (c *Coordinator) removeGroup(g *group) {
	c.mu.Lock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
	c.mu.Unlock()
}

func (c *Coordinator) allGroups() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, g)
	}
	return out
}

// appendRecords writes recs to the group's partition of __consumer_offsets.
func (c *Coordinator) appendRecords(g *group, recs []record.KV) error {
	if len(recs) == 0 {
		return nil
	}
	l, err := c.partitionLog(g.partition)
	if err != nil {
		return err
	}
	_, err = l.Append(recs)
	if err != nil {
		c.log.Warn("append to __consumer_offsets failed", "group", g.id, "partition", g.partition, "err", err)
	}
	return err
}

type clientKey struct{}

type clientInfo struct{ id, host string }

// WithClient attaches the request header's client ID and the client's host (Kafka form
// "/1.2.3.4") to ctx; JoinGroup stores them on the member for DescribeGroups.
func WithClient(ctx context.Context, clientID, clientHost string) context.Context {
	return context.WithValue(ctx, clientKey{}, clientInfo{clientID, clientHost})
}

func clientFrom(ctx context.Context) clientInfo {
	ci, _ := ctx.Value(clientKey{}).(clientInfo)
	return ci
}

func nowMs() int64 { return time.Now().UnixMilli() }
