package mirror

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/storage"
)

// Local is the destination broker as the mirror manager sees it.
type Local interface {
	// ClusterID is this cluster's ID.
	ClusterID() string
	// Metadata is the cluster metadata controller (topics, mirrors, desired states).
	Metadata() *metadata.Controller
	// Log returns the local log of topic/partition, opening it if the topic exists in the
	// metadata image.
	Log(topic string, partition int32) (*storage.Log, error)
	// CreateTopic creates a topic through the metadata log with the given ID, partition
	// count and configs, then opens its logs; an existing topic with the same name and ID
	// is success (failback); another ID is an error.
	CreateTopic(ctx context.Context, name string, id metadata.TopicID, partitions int32, configs map[string]string, mirror *metadata.MirrorTopic) error
	// CreatePartitions grows topic name to count partitions through the metadata log and
	// opens the new logs (source partition growth, spec section 8).
	CreatePartitions(ctx context.Context, name string, count int32) error
	// Groups is the local group coordinator, for the group offset sync (spec section 9);
	// nil when the broker has none (the sync task then does nothing).
	Groups() *group.Coordinator
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

// tp names a partition of a topic.
type tp struct {
	topic     string
	partition int32
}

// Manager runs Cluster Mirroring on the destination broker (spec sections 3–8): the
// mirror RPCs, one runner per mirror (source metadata, the partition state machine),
// the fetchers, and the partition states in __mirror_state.
type Manager struct {
	local    Local
	log      *slog.Logger
	cfg      BrokerConfig                 // static: server.properties
	live     atomic.Pointer[BrokerConfig] // cfg with the dynamic broker configs, see config()
	store    stateStore
	throttle *throttle

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	mirrors map[string]*mirrorRT
	parts   map[tp]*partition
	loaded  map[stateKey]*stateRecord
	started bool
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
		store:    stateStore{local: opts.Local},
		throttle: &throttle{},
		ctx:      ctx, cancel: cancel,
		mirrors: map[string]*mirrorRT{}, parts: map[tp]*partition{}, loaded: map[stateKey]*stateRecord{},
	}
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

// Start loads the partition states from __mirror_state when it exists (the first
// CreateClusterMirror creates it), starts every mirror and its partitions as the metadata
// image asks, and follows metadata changes until Close.
func (m *Manager) Start(ctx context.Context) error {
	loaded := map[stateKey]*stateRecord{}
	if m.store.exists() {
		var err error
		if loaded, err = m.store.load(); err != nil {
			return fmt.Errorf("load %s: %w", StateTopic, err)
		}
	}
	m.mu.Lock()
	m.loaded = loaded
	m.started = true
	m.mu.Unlock()
	sub := m.local.Metadata().Subscribe()
	m.reconcile()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			select {
			case <-m.ctx.Done():
				return
			case _, ok := <-sub:
				if !ok {
					return
				}
				m.reconcile()
			}
		}
	}()
	return nil
}

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
	want := map[tp]bool{}
	for _, t := range im.Topics {
		if t.Mirror == nil {
			continue
		}
		if _, ok := im.Mirrors[t.Mirror.MirrorName]; !ok {
			continue
		}
		throttled := t.Configs[cfgThrottledReplicas]
		for i := int32(0); i < t.Partitions; i++ {
			k := tp{t.Name, i}
			want[k] = true
			p := m.parts[k]
			if p == nil || p.mirror != t.Mirror.MirrorName || p.topicID != t.ID {
				p = m.newPartition(t.Mirror.MirrorName, t.Name, t.ID, i)
				m.parts[k] = p
			}
			p.throttled.Store(isThrottledReplica(throttled, i, nodeID))
		}
	}
	for k := range m.parts {
		if !want[k] {
			delete(m.parts, k)
		}
	}
	rts := make([]*mirrorRT, 0, len(m.mirrors))
	for _, r := range m.mirrors {
		rts = append(rts, r)
	}
	m.mu.Unlock()
	for _, r := range stopped {
		r.stop()
	}
	for _, r := range rts {
		r.kick()
	}
}

// newPartition builds a partition runtime from its persisted state. A partition that was
// mid-mirroring restarts through LOG_ALIGNMENT (its runtime starts as UNKNOWN); PAUSED,
// PAUSING, STOPPING, STOPPED and FAILED are kept. m.mu held.
func (m *Manager) newPartition(mirror, topic string, id metadata.TopicID, idx int32) *partition {
	p := &partition{m: m, mirror: mirror, topic: topic, topicID: id, index: idx}
	p.sourceHW.Store(-1)
	p.leader.Store(-1)
	p.newestTs.Store(-1)
	st := m.loaded[p.key()]
	if st == nil {
		st = newStateRecord()
	} else {
		cp := *st
		st = &cp
		switch st.State {
		case mirrorproto.StateMirroring, mirrorproto.StateLogAlignment, mirrorproto.StateEpochFencing,
			mirrorproto.StateULERecovery:
			st.PrevState = st.State
			st.State = mirrorproto.StateUnknown
		}
	}
	p.st = st
	p.cur.Store(int32(st.State))
	return p
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
		if k.topic == topic {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].index < out[j].index })
	return out
}

func (m *Manager) partitionOf(topic string, idx int32) *partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[tp{topic, idx}]
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
