// Package group is the classic consumer-group coordinator: membership (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup), committed offsets (OffsetCommit, OffsetFetch,
// OffsetDelete), transactional offsets (TxnOffsetCommit, pending until the transaction's
// marker) and group administration (ListGroups, DescribeGroups, DeleteGroups), with
// durable state in the internal topic __consumer_offsets in Apache Kafka's record formats.
// A coordinator serves the groups of the partitions of __consumer_offsets it is elected
// for (OnElection, OnResignation). It follows Apache Kafka's classic GroupCoordinator /
// GroupMetadataManager (core/src/main/scala/kafka/coordinator/group and the
// group-coordinator module's classic/ClassicGroup.java). KIP-848 consumer groups and
// share groups are not served.
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

	"github.com/kmirror/kmirror/internal/kafka"
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
// broker supplies it over its real partition log (internal/storage), as the leader of
// the partition.
type PartitionLog interface {
	// Append appends one uncompressed batch holding recs (record.Build, producer ID -1),
	// assigning offsets; it returns the batch's base offset once the batch is durable
	// and visible.
	Append(recs []record.KV) (int64, error)
	// AppendTransactional appends recs as one transactional batch of producerID at
	// producerEpoch (base sequence 0), as Kafka's GroupMetadataManager writes a
	// TxnOffsetCommit: appended as the coordinator (AppendOrigin.COORDINATOR: the
	// producer epoch is checked, sequences are not). It returns the batch's base offset
	// once durable and visible; a fenced epoch is kerr.InvalidProducerEpoch.
	AppendTransactional(recs []record.KV, producerID int64, producerEpoch int16) (int64, error)
	// Scan calls fn for every batch, control batches (transaction markers) included, from
	// the batch holding offset from (the log start if from is below it) to the log end
	// offset, in offset order; it returns the offset after the last batch it read (from,
	// or the log start, when there was none).
	Scan(from int64, fn func(b record.Batch) error) (int64, error)
	// LogEndOffset is the offset the next append gets.
	LogEndOffset() int64
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
	// Log opens partition p of __consumer_offsets, as its leader, when p is elected.
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

// Coordinator is the group coordinator for the partitions of __consumer_offsets this
// broker leads: OnElection loads a partition and serves its groups, OnResignation
// unloads them (Kafka's GroupCoordinator.onElection / onResignation). Safe for
// concurrent use.
type Coordinator struct {
	opts   Options
	log    *slog.Logger
	closed atomic.Bool

	// mu guards the maps below and expiryOn; it is never held while taking a
	// group's lock.
	mu       sync.Mutex
	groups   map[string]*group         // groups of loaded partitions
	logs     map[int32]PartitionLog    // opened logs of elected partitions
	parts    map[int32]*partition      // elected partitions (loading, loaded or failed)
	epochs   map[int32]int32           // highest leader epoch seen per partition (Kafka's epochForPartitionId)
	resigned map[int32]int32           // leader epoch of the latest resignation per partition
	txnOpen  map[int64]map[string]bool // producer ID → groups with pending transactional offsets (openGroupsForProducer)
	loads    sync.WaitGroup            // running loads
	expiryOn bool                      // the expiry loop runs (started by the first election)

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// New returns a coordinator that owns no partition: every group gets NOT_COORDINATOR
// until OnElection loads its partition.
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
		opts:     opts,
		log:      opts.Logger.With("component", "group-coordinator"),
		groups:   make(map[string]*group),
		logs:     make(map[int32]PartitionLog),
		parts:    make(map[int32]*partition),
		epochs:   make(map[int32]int32),
		resigned: make(map[int32]int32),
		txnOpen:  make(map[int64]map[string]bool),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// PartitionFor is the __consumer_offsets partition of groupID:
// Utils.abs(groupId.hashCode()) % numPartitions, with Java's String.hashCode over UTF-16
// code units (GroupMetadataManager.partitionFor).
func (c *Coordinator) PartitionFor(groupID string) int32 {
	return kafka.Abs(kafka.StringHashCode(groupID)) % c.opts.NumPartitions
}

// partitionLog returns the log of partition p, opened (outside mu) on first use and
// kept while p is elected.
func (c *Coordinator) partitionLog(p int32) (PartitionLog, error) {
	c.mu.Lock()
	l, ok := c.logs[p]
	c.mu.Unlock()
	if ok {
		return l, nil
	}
	if c.opts.Log == nil {
		return nil, errors.New("group: no __consumer_offsets log configured")
	}
	l, err := c.opts.Log(p)
	if err != nil {
		return nil, fmt.Errorf("group: open %s-%d: %w", TopicName, p, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.logs[p]; ok {
		return cur, nil
	}
	if c.parts[p] != nil {
		c.logs[p] = l
	}
	return l, nil
}

// Close stops timers, loads and the expiry loop; members blocked in JoinGroup or
// SyncGroup are answered NOT_COORDINATOR (as on resignation), later requests
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed.Store(true)
		expiry := c.expiryOn
		for _, part := range c.parts {
			part.abandoned.Store(true)
		}
		c.mu.Unlock()
		close(c.stop)
		if expiry {
			<-c.done
		}
		c.loads.Wait()
		for _, g := range c.allGroups() {
			c.unloadGroup(g)
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

// groupStatus is validateGroupStatus: the group-level error for groupID, or 0:
// INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE (closed), COORDINATOR_LOAD_IN_PROGRESS or
// NOT_COORDINATOR (from the group's partition). allowEmpty is true for the APIs where
// Kafka accepts the empty group ID (OffsetCommit, OffsetFetch, DescribeGroups,
// DeleteGroups, OffsetDelete).
func (c *Coordinator) groupStatus(groupID string, allowEmpty bool) int16 {
	if (!allowEmpty && groupID == "") || len(groupID) > MaxGroupIDLen {
		return errInvalidGroupID
	}
	if c.closed.Load() {
		return errCoordinatorNotAvailable
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.partitionStatusLocked(c.PartitionFor(groupID))
}

// getGroup returns the group (nil if absent) or the error of its partition
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS; COORDINATOR_NOT_AVAILABLE once closed).
// With create, an absent group of a loaded partition is created Empty with no protocol
// type. Checked and created under mu, so that no group is created in a partition being
// unloaded (Kafka's partitionLock).
func (c *Coordinator) getGroup(groupID string, create bool) (*group, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, errCoordinatorNotAvailable
	}
	p := c.PartitionFor(groupID)
	if e := c.partitionStatusLocked(p); e != 0 {
		return nil, e
	}
	g := c.groups[groupID]
	if g == nil && create {
		g = newGroup(groupID, p, nowMs())
		c.groups[groupID] = g
	}
	return g, 0
}

// removeGroup drops a Dead group from the map (called with g.mu held).
func (c *Coordinator) removeGroup(g *group) {
	c.mu.Lock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
		for pid, ids := range c.txnOpen { // Kafka's removeGroupFromAllProducers
			if ids[g.id] {
				c.dropOpenTxnLocked(pid, g.id)
			}
		}
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

// appendRecords writes recs to the group's partition of __consumer_offsets and returns
// the batch's base offset.
func (c *Coordinator) appendRecords(g *group, recs []record.KV) (int64, error) {
	if len(recs) == 0 {
		return -1, nil
	}
	l, err := c.partitionLog(g.partition)
	if err != nil {
		return -1, err
	}
	base, err := l.Append(recs)
	if err != nil {
		c.log.Warn("append to __consumer_offsets failed", "group", g.id, "partition", g.partition, "err", err)
	}
	return base, err
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
