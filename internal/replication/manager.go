// Package replication runs the follower side of Kafka's replication protocol on a broker:
// replica fetchers (Kafka's ReplicaFetcherManager and ReplicaFetcherThread) that fetch
// the partitions this broker follows from their leaders with follower Fetch requests
// (ReplicaState, CurrentLeaderEpoch, LastFetchedEpoch), append the record batches as
// they are, take the leader's high watermark and log start offset, and truncate where
// the logs diverge. The leader's side — follower positions, the ISR, the high watermark
// — is internal/partition's. See ../shared/design/cluster.md §2 and docs/replication.md.
package replication

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/partition"
)

// Options configure a Manager; zero values take Kafka's defaults.
type Options struct {
	// NodeID is this broker's node.id (the fetches' ReplicaState.ReplicaId).
	NodeID int32
	// BrokerEpoch returns this broker's broker epoch (ReplicaState.ReplicaEpoch).
	BrokerEpoch func() int64
	// Dial returns a new client to broker id's inter-broker endpoint, seeded with that
	// endpoint only: each fetcher has its own connection, as Kafka's fetcher threads do.
	Dial func(id int32) (*kgo.Client, error)
	// NumFetchers is num.replica.fetchers (1): fetchers per leader broker.
	NumFetchers int
	// MaxWaitMs is replica.fetch.wait.max.ms (500).
	MaxWaitMs int32
	// MinBytes is replica.fetch.min.bytes (1).
	MinBytes int32
	// MaxBytes is replica.fetch.response.max.bytes (10 MiB).
	MaxBytes int32
	// PartitionMaxBytes is replica.fetch.max.bytes (1 MiB).
	PartitionMaxBytes int32
	// Backoff is replica.fetch.backoff.ms (1 s): the pause after a failed fetch.
	Backoff time.Duration
	// Logger receives the fetchers' messages; nil discards them.
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.NumFetchers <= 0 {
		o.NumFetchers = 1
	}
	if o.MaxWaitMs <= 0 {
		o.MaxWaitMs = 500
	}
	if o.MinBytes <= 0 {
		o.MinBytes = 1
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 10 << 20
	}
	if o.PartitionMaxBytes <= 0 {
		o.PartitionMaxBytes = 1 << 20
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.BrokerEpoch == nil {
		o.BrokerEpoch = func() int64 { return -1 }
	}
}

// fetcherKey names a fetcher: the leader it fetches from and its index below
// num.replica.fetchers.
type fetcherKey struct {
	leader int32
	idx    int
}

// Manager assigns followed partitions to fetchers, one set of fetchers per leader broker
// (Kafka's AbstractFetcherManager). Safe for concurrent use.
type Manager struct {
	opts   Options
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	fetchers map[fetcherKey]*fetcher
	assigned map[*partition.Partition]fetcherKey
	wg       sync.WaitGroup
}

// NewManager returns a manager with no partitions; Follow gives it some.
func NewManager(opts Options) *Manager {
	opts.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{opts: opts, log: opts.Logger.With("component", "replica-fetcher"), ctx: ctx, cancel: cancel,
		fetchers: map[fetcherKey]*fetcher{}, assigned: map[*partition.Partition]fetcherKey{}}
}

// fetcherIndex is Kafka's AbstractFetcherManager.getFetcherId: abs(31·hash(topic) +
// partition) mod num.replica.fetchers.
func (m *Manager) fetcherIndex(topic string, p int32) int {
	return int(kafka.Abs(31*kafka.StringHashCode(topic)+p)) % m.opts.NumFetchers
}

// Follow fetches each partition from the leader its registration names, at its leader
// epoch, from its LEO; a partition already followed moves to the right fetcher and
// restarts its fetch state (a new leader or leader epoch). Partitions without a leader
// are unfollowed.
func (m *Manager) Follow(parts ...*partition.Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return
	}
	for _, p := range parts {
		reg := p.Registration()
		if reg == nil || reg.Leader < 0 || reg.Leader == m.opts.NodeID {
			m.unfollowLocked(p)
			continue
		}
		k := fetcherKey{leader: reg.Leader, idx: m.fetcherIndex(p.Topic(), p.Index())}
		if old, ok := m.assigned[p]; ok && old != k {
			m.unfollowLocked(p)
		}
		f := m.fetchers[k]
		if f == nil {
			f = newFetcher(m, k)
			m.fetchers[k] = f
			m.wg.Add(1)
			go func() { defer m.wg.Done(); f.run(m.ctx) }()
		}
		m.assigned[p] = k
		f.add(p, reg.LeaderEpoch)
	}
}

// Unfollow stops fetching the partitions (they lead now, went offline, or left this
// broker). A fetcher left with no partitions stops.
func (m *Manager) Unfollow(parts ...*partition.Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range parts {
		m.unfollowLocked(p)
	}
}

func (m *Manager) unfollowLocked(p *partition.Partition) {
	k, ok := m.assigned[p]
	if !ok {
		return
	}
	delete(m.assigned, p)
	f := m.fetchers[k]
	if f != nil && f.remove(p) == 0 {
		delete(m.fetchers, k)
		f.stop()
	}
}

// Close stops every fetcher and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	m.cancel()
	m.mu.Unlock()
	m.wg.Wait()
}
