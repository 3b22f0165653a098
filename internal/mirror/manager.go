package mirror

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	replica "github.com/kmirror/kmirror/internal/partition"
)

// Local is the destination broker as the mirror manager sees it: one broker of the
// destination cluster (every broker runs a Manager, for the mirror partitions it leads).
type Local interface {
	// ClusterID is this cluster's ID.
	ClusterID() string
	// Metadata is the cluster metadata log (topics, mirrors, desired states); writes are
	// carried to the active controller.
	Metadata() *metadata.Controller
	// Partition returns topic/partition once this broker leads it, waiting a few seconds
	// for the image that makes it leader; the error wraps replica.ErrNotLeader when
	// another broker leads it, replica.ErrUnknownTopicOrPartition when it does not exist.
	// Every write of the mirror goes through it.
	Partition(topic string, partition int32) (*replica.Partition, error)
	// Leads reports whether this broker leads topic/partition now.
	Leads(topic string, partition int32) bool
	// CreateTopic creates a topic through the metadata log with the given ID, partition
	// count and configs; an existing topic with the same name and ID is success
	// (failback, and then it gets the mirror association); another ID is an error.
	CreateTopic(ctx context.Context, name string, id metadata.TopicID, partitions int32, configs map[string]string, mirror *metadata.MirrorTopic) error
	// CreatePartitions grows topic name to count partitions through the metadata log
	// (source partition growth, spec section 8).
	CreatePartitions(ctx context.Context, name string, count int32) error
	// BumpLeaderEpoch has the active controller raise the leader epoch of
	// topic/partition to at least epoch (BumpLeaderEpochs, spec section 6) and waits
	// until this broker's partition has it.
	BumpLeaderEpoch(ctx context.Context, topic string, partition int32, epoch int32) error
	// BrokerRequest sends an inter-broker request to broker id (the mirror state
	// coordinators, the describe of partitions other brokers lead).
	BrokerRequest(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error)
	// Groups reads and writes this cluster's consumer groups for the group offset sync
	// (spec section 9), at each group's coordinator; nil when the broker has none.
	Groups() group.Access
	// Bounds is the log start offset and LEO of topic/partition, asked of its leader
	// (what synced group offsets are clamped to).
	Bounds(ctx context.Context, topic string, partition int32) (replica.Bounds, error)
	// NodeID is this broker's node ID.
	NodeID() int32
	// Advertised is host:port of this broker, for logs.
	Advertised() string
}

// Options configures a Manager.
type Options struct {
	Local  Local
	Logger *slog.Logger
	Config BrokerConfig
}

// Manager runs Cluster Mirroring on the destination broker (spec sections 3–8): the
// mirror RPCs, one runner per mirror (source metadata, the partition state machine),
// the fetchers, and the partition states in __mirror_state.
type Manager struct {
	local    Local
	log      *slog.Logger
	cfg      BrokerConfig                 // static: server.properties
	live     atomic.Pointer[BrokerConfig] // cfg with the dynamic broker configs, see config()
	store    stateStore                   // this broker's view of __mirror_state, and the partitions of it it coordinates
	throttle *throttle

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	mirrors map[string]*mirrorRT
	parts   map[kafka.TopicPartition]*partition // the mirror partitions this broker leads
	started bool

	// leadership is signalled when this broker's partition leaderships change
	// (LeadershipChanged); a reconcile follows.
	leadership chan struct{}
}

// NewManager returns a Manager; call Start before serving RPCs.
func NewManager(opts Options) *Manager {
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	cfg := opts.Config.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		local: opts.Local, log: lg.With("component", "mirror"), cfg: cfg,
		throttle: &throttle{},
		ctx:      ctx, cancel: cancel,
		mirrors: map[string]*mirrorRT{}, parts: map[kafka.TopicPartition]*partition{}, leadership: make(chan struct{}, 1),
	}
	m.store.local = opts.Local
	m.setLive(cfg)
	return m
}

// config returns the broker-level mirror settings in force: server.properties overlaid
// with the dynamic broker configs of the metadata image (applied on every image change).
func (m *Manager) config() BrokerConfig { return *m.live.Load() }

func (m *Manager) setLive(c BrokerConfig) {
	m.live.Store(&c)
	m.throttle.setRate(c.ThrottledRate)
}

// Start waits until the partitions of __mirror_state this broker coordinates are loaded
// (StatePartitionElected, called for those it leads before Start), then starts every
// mirror and the partitions this broker leads, each from its persisted state, and follows
// metadata and leadership changes until Close.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.store.awaitLoaded(ctx); err != nil {
		return fmt.Errorf("load %s: %w", StateTopic, err)
	}
	m.mu.Lock()
	m.started = true
	m.mu.Unlock()
	sub := m.local.Metadata().Subscribe()
	m.reconcile()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		retry := time.NewTicker(time.Second) // partitions whose state could not be read yet
		defer retry.Stop()
		for {
			select {
			case <-m.ctx.Done():
				return
			case _, ok := <-sub:
				if !ok {
					return
				}
			case <-m.leadership:
			case <-retry.C:
			}
			m.reconcile()
		}
	}()
	return nil
}

// LeadershipChanged tells the manager that this broker's partition leaderships changed:
// it takes over the mirror partitions it now leads and drops the others (their new
// leaders continue from the persisted states). It does not block.
func (m *Manager) LeadershipChanged() {
	select {
	case m.leadership <- struct{}{}:
	default:
	}
}

// HoldOnLead reports whether this broker, becoming the leader of partition partition of
// topic t (image im), starts with its HW held (the replica manager's HoldOnLead, asked at
// become and after every image until the runtime decides): true while t is a mirror
// topic of an existing mirror not being stopped — a partition whose runtime this manager
// runs, and whose persisted state it has not read yet, so its log may be untrusted (a
// failback, re-attach or new mirror in LOG_ALIGNMENT, cluster.md §3). The runtime's first
// syncHWHold, as soon as takeOver has read the state, decides in its place: an aligned log
// (a new leader of a MIRRORING partition) is held only until then. It answers the same
// once the manager is closed: a shutdown releasing an undecided hold would advance the
// HW over an untrusted tail and checkpoint it; the broker's partitions stop next, which
// drops holds without advancing the HW. It does not block and takes no lock.
func (m *Manager) HoldOnLead(im *metadata.Image, t *metadata.Topic, partition int32) bool {
	if t == nil || t.Mirror == nil || t.Mirror.Desired == metadata.DesiredStopped ||
		partition < 0 || partition >= t.Partitions {
		return false
	}
	_, ok := im.Mirrors[t.Mirror.MirrorName]
	return ok
}

// StatePartitionElected makes this broker the state coordinator of partition p of
// __mirror_state (it leads it at leaderEpoch): the partition is loaded in the background.
func (m *Manager) StatePartitionElected(p int32, leaderEpoch int32) { m.store.elected(p, leaderEpoch) }

// StatePartitionResigned ends this broker's coordination of partition p of __mirror_state.
func (m *Manager) StatePartitionResigned(p int32) { m.store.resigned(p) }

// Close stops every runner and fetcher and closes the source connections. Partition
// states stay in __mirror_state; a new Manager resumes from them.
func (m *Manager) Close() {
	m.cancel()
	m.mu.Lock()
	rts := make([]*mirrorRT, 0, len(m.mirrors))
	for _, r := range m.mirrors {
		rts = append(rts, r)
	}
	m.mirrors = map[string]*mirrorRT{}
	m.mu.Unlock()
	for _, r := range rts {
		r.stop()
	}
	m.wg.Wait()
}

// reconcile brings runners and partition runtimes in line with the metadata image.
func (m *Manager) reconcile() {
	im := m.local.Metadata().Image()
	m.mu.Lock()
	if !m.started || m.ctx.Err() != nil {
		m.mu.Unlock()
		return
	}
	if live := m.cfg.withDynamic(im, m.local.NodeID()); live != m.config() {
		m.setLive(live)
		m.log.Info("mirror broker configs changed", "throttledRate", live.ThrottledRate, "fetchers", live.NumReplicaFetchers,
			"refreshIntervalMs", live.RefreshIntervalMs, "retryMaxAttempts", live.RetryMaxAttempts)
	}
	nodeID := m.local.NodeID()
	var stopped []*mirrorRT
	for name, r := range m.mirrors {
		if _, ok := im.Mirrors[name]; !ok {
			delete(m.mirrors, name)
			stopped = append(stopped, r)
		}
	}
	for name := range im.Mirrors {
		if _, ok := m.mirrors[name]; !ok {
			m.mirrors[name] = newMirrorRT(m, name)
		}
	}
	want := map[kafka.TopicPartition]bool{}
	var missing []*partition // led here, not yet known: their states are read below
	var dropped []*partition // runtimes dropped: their HW holds go (dropHWHold)
	var kept []*partition    // runtimes kept: their HW decisions hold again (a leadership lost and back)
	for _, t := range im.Topics {
		if t.Mirror == nil {
			continue
		}
		if _, ok := im.Mirrors[t.Mirror.MirrorName]; !ok {
			continue
		}
		throttled := t.Configs[cfgThrottledReplicas]
		for i := int32(0); i < t.Partitions; i++ {
			k := kafka.TopicPartition{Topic: t.Name, Partition: i}
			if !m.local.Leads(t.Name, i) {
				continue // its leader runs it
			}
			want[k] = true
			p := m.parts[k]
			if p == nil || p.mirror != t.Mirror.MirrorName || p.topicID != t.ID {
				missing = append(missing, &partition{m: m, mirror: t.Mirror.MirrorName, topic: t.Name, topicID: t.ID, index: i,
					byName: t.Mirror.SourceTopicID == (metadata.TopicID{})})
				if p != nil {
					dropped = append(dropped, p)
				}
				delete(m.parts, k)
				continue
			}
			p.throttled.Store(isThrottledReplica(throttled, i, nodeID))
			kept = append(kept, p)
		}
	}
	for k, p := range m.parts {
		if !want[k] {
			dropped = append(dropped, p)
			delete(m.parts, k)
		}
	}
	m.mu.Unlock()
	for _, p := range dropped {
		p.dropHWHold()
	}
	for _, p := range kept {
		p.reassertHWHold()
	}
	m.takeOver(im, missing)
	m.mu.Lock()
	rts := make([]*mirrorRT, 0, len(m.mirrors))
	for _, r := range m.mirrors {
		rts = append(rts, r)
	}
	failing := map[string]bool{} // mirrors with a partition led here to fail over
	for _, p := range m.parts {
		if t := im.Topics[p.topic]; t != nil && t.Mirror != nil && t.Mirror.Desired == metadata.DesiredStopped &&
			p.state() != mirrorproto.StateStopped {
			failing[p.mirror] = true
		}
	}
	m.mu.Unlock()
	for _, r := range stopped {
		r.stop()
	}
	for _, r := range rts {
		if failing[r.name] {
			r.failoverPending()
		}
		r.kick()
	}
}

// takeOver reads the persisted states of partitions this broker now leads (a new
// mirror partition, a restart, a leadership that moved here: cluster.md §3) and adds
// their runtimes. A state that cannot be read yet (its coordinator is loading or down)
// leaves the partition out until a later reconcile.
func (m *Manager) takeOver(im *metadata.Image, ps []*partition) {
	for _, p := range ps {
		ctx, cancel := context.WithTimeout(m.ctx, stateRetry)
		st, err := m.store.read(ctx, p.key())
		cancel()
		if err != nil && m.store.exists() {
			m.log.Warn("mirror partition waits for its persisted state", "mirror", p.mirror, "partition", p.String(), "err", err)
			continue
		}
		initPartition(p, st)
		t := im.Topics[p.topic]
		m.mu.Lock()
		added := false
		if cur := m.parts[kafka.TopicPartition{Topic: p.topic, Partition: p.index}]; cur == nil && t != nil && t.ID == p.topicID && m.local.Leads(p.topic, p.index) {
			p.throttled.Store(isThrottledReplica(t.Configs[cfgThrottledReplicas], p.index, m.local.NodeID()))
			m.parts[kafka.TopicPartition{Topic: p.topic, Partition: p.index}] = p
			added = true
		}
		m.mu.Unlock()
		if added {
			// the runtime decides the hold its leader took on becoming leader (HoldOnLead):
			// kept for an untrusted log about to align, released for any other
			p.mu.Lock()
			p.syncHWHold()
			p.mu.Unlock()
		}
	}
}

// initPartition sets up a partition runtime from its persisted state (nil: none yet). A
// partition that was mid-mirroring restarts through LOG_ALIGNMENT (its runtime starts as
// UNKNOWN; an aligned log is then only checked, never truncated); PAUSED, PAUSING,
// STOPPING, STOPPED and FAILED are kept.
func initPartition(p *partition, st *stateRecord) {
	p.sourceHW.Store(-1)
	p.leader.Store(-1)
	p.srcLeaderEpoch.Store(-1)
	p.newestTs.Store(-1)
	if st == nil {
		st = newStateRecord()
	} else {
		switch st.State {
		case mirrorproto.StateMirroring, mirrorproto.StateLogAlignment, mirrorproto.StateEpochFencing,
			mirrorproto.StateULERecovery:
			st.PrevState = st.State
			st.State = mirrorproto.StateUnknown
		}
	}
	p.st = st
	p.cur.Store(int32(st.State))
}

// partitionsOf returns the partitions of mirror, sorted by topic and partition.
func (m *Manager) partitionsOf(mirror string) []*partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*partition
	for _, p := range m.parts {
		if p.mirror == mirror {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].index < out[j].index
	})
	return out
}

// topicPartitions returns the partitions of topic, by index.
func (m *Manager) topicPartitions(topic string) []*partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*partition
	for k, p := range m.parts {
		if k.Topic == topic {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].index < out[j].index })
	return out
}

func (m *Manager) partitionOf(topic string, idx int32) *partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[kafka.TopicPartition{Topic: topic, Partition: idx}]
}

func (m *Manager) runner(name string) *mirrorRT {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mirrors[name]
}

// PartitionStat holds one mirror partition's figures for metrics (spec section 13).
type PartitionStat struct {
	Mirror    string
	Topic     string
	Partition int32
	State     mirrorproto.State
	// Lag is max(0, source HW − LEO) in records, −1 before the first fetch response.
	Lag int64
	// BytesFetched counts record-batch bytes received from the source; BytesAppended and
	// Appends what was appended (appends, not batches: one append may hold many);
	// RecordsAppended the records of the appended batches, from their headers (control
	// records included: they hold offsets too).
	BytesFetched, BytesAppended, Appends, RecordsAppended int64
	// SecondsBehind is 0 when Lag is 0, else the age in seconds of the newest mirrored
	// batch's max timestamp against the broker's clock (the source's newest record taken
	// as now: an upper bound while the source is idle); −1 when unknown (nothing appended
	// since the broker started, or Lag unknown).
	SecondsBehind float64
	// SkippedOffsets and TruncatedRecords are the reports of spec sections 15 and 16.
	SkippedOffsets, TruncatedRecords int64
}

// FetchStat holds one mirror's Fetch counters since the broker started (spec section
// 13): requests sent to the source and errors (failed requests: connection errors and
// top-level error codes; plus partitions answered with an error code).
type FetchStat struct {
	Mirror           string
	Requests, Errors int64
}

// ThrottleSeconds is the time, in seconds since the broker started, that the mirror
// fetchers of this broker left throttled partitions out of their Fetch requests or
// waited for the quota (mirror.replication.throttled.rate).
func (m *Manager) ThrottleSeconds() float64 {
	return time.Duration(m.throttle.held.Load()).Seconds()
}

// FetchStats returns the Fetch counters of every mirror running on this broker, sorted
// by mirror name.
func (m *Manager) FetchStats() []FetchStat {
	m.mu.Lock()
	out := make([]FetchStat, 0, len(m.mirrors))
	for name, r := range m.mirrors {
		out = append(out, FetchStat{Mirror: name, Requests: r.fetchRequests.Load(), Errors: r.fetchErrors.Load()})
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Mirror < out[j].Mirror })
	return out
}

// Stats returns the figures of every mirror partition of this broker, sorted by mirror,
// topic and partition.
func (m *Manager) Stats() []PartitionStat {
	m.mu.Lock()
	ps := make([]*partition, 0, len(m.parts))
	for _, p := range m.parts {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	out := make([]PartitionStat, 0, len(ps))
	now := time.Now().UnixMilli()
	for _, p := range ps {
		d := p.describe()
		behind := -1.0
		switch ts := p.newestTs.Load(); {
		case d.Lag == 0:
			behind = 0
		case d.Lag > 0 && ts >= 0:
			behind = float64(max(0, now-ts)) / 1000
		}
		out = append(out, PartitionStat{
			Mirror: p.mirror, Topic: p.topic, Partition: p.index, State: d.State, Lag: d.Lag,
			BytesFetched: p.bytesFetched.Load(), BytesAppended: p.bytesAppended.Load(), Appends: p.batchesAppended.Load(),
			RecordsAppended: p.recordsAppended.Load(), SecondsBehind: behind,
			SkippedOffsets: d.SkippedOffsets, TruncatedRecords: d.TruncatedRecords,
		})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Mirror != b.Mirror {
			return a.Mirror < b.Mirror
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return out
}

// clusterStates returns the state of every partition of mirror topic t, by index: the
// runtime's for the partitions this broker leads, the persisted one from their state
// coordinators for the others (UNKNOWN when it cannot be read).
func (m *Manager) clusterStates(ctx context.Context, t *metadata.Topic) []mirrorproto.State {
	out := make([]mirrorproto.State, t.Partitions)
	for i := range out {
		idx := int32(i)
		if p := m.partitionOf(t.Name, idx); p != nil && p.topicID == t.ID {
			out[i] = p.state()
			continue
		}
		out[i] = mirrorproto.StateUnknown
		if t.Mirror == nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := m.store.read(rctx, stateKey{Mirror: t.Mirror.MirrorName, TopicID: t.ID, Partition: idx})
		cancel()
		if err == nil && st != nil {
			out[i] = st.State
		}
	}
	return out
}
