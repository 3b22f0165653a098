// Package broker holds kmirror's request handlers, one file per API (each file's header
// names the versions served), over the broker's state: the metadata image, the partition
// logs, the group coordinator and the mirror manager. It follows Apache Kafka's
// KafkaApis/ReplicaManager for a single node: this broker leads every partition, its ISR
// is itself, and the high watermark equals the log end offset.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/storage"
	"github.com/kmirror/kmirror/internal/txn"
	"github.com/kmirror/kmirror/internal/wire"
)

// OffsetsTopic is Kafka's internal topic for group offsets and metadata.
const OffsetsTopic = "__consumer_offsets"

// metadataTopic names the raft metadata log's directory (<log.dirs>/__cluster_metadata-0),
// as in Kafka's KRaft layout; it is not a partition log.
const metadataTopic = "__cluster_metadata"

// Broker is one kmirror broker.
type Broker struct {
	cfg      *config.Values
	nodeID   int32
	host     string
	port     int32
	logger   *slog.Logger
	dataDir  string
	listener net.Listener

	meta       *metadata.Controller
	logs       *storage.Manager
	groups     *group.Coordinator
	txns       *txn.Coordinator
	mirrors    Mirrors
	newMirrors NewMirrorsFunc
	pids       *producerIDs
	server     *wire.Server

	sessionsOnce sync.Once
	sessions     *fetchSessionCache // fetch sessions (KIP-227), created on first Fetch

	mu     sync.RWMutex
	topics map[string]*topicState // open partition logs by topic name

	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup
}

// topicState is the set of open logs of one topic in the current image.
type topicState struct {
	meta *metadata.Topic
	logs []*storage.Log
}

// log returns the log of partition p, nil when ts is nil or p is not a partition of it.
func (ts *topicState) log(p int32) *storage.Log {
	if ts == nil || p < 0 || int(p) >= len(ts.logs) {
		return nil
	}
	return ts.logs[p]
}

// New validates cfg (server.properties keys with Kafka's names), creates or reads
// meta.properties, opens the metadata log and every partition log (recovering them),
// loads the group coordinator and starts the mirror manager. It does not accept
// connections until Serve.
//
// newMirrors builds the cluster mirroring service; nil runs a broker without it.
func New(cfg *config.Values, logger *slog.Logger, newMirrors NewMirrorsFunc) (*Broker, error) {
	b := &Broker{cfg: cfg, logger: logger, topics: map[string]*topicState{}, newMirrors: newMirrors}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.nodeID = cfg.Int32("node.id")
	b.dataDir = cfg.String("log.dirs")
	if b.dataDir == "" {
		b.dataDir = cfg.String("log.dir")
	}
	if strings.Contains(b.dataDir, ",") {
		return nil, fmt.Errorf("log.dirs: kmirror uses one data directory, got %q", b.dataDir)
	}
	listen, err := listenerAddr(cfg.String("listeners"))
	if err != nil {
		return nil, err
	}
	// Bind first: a busy port fails before anything is written to log.dirs.
	if b.listener, err = net.Listen("tcp", listen); err != nil {
		return nil, fmt.Errorf("listeners: %w", err)
	}
	started := false
	defer func() {
		if !started {
			b.listener.Close()
		}
	}()
	adv := cfg.String("advertised.listeners")
	if adv == "" {
		adv = cfg.String("listeners")
	}
	advAddr, err := listenerAddr(adv)
	if err != nil {
		return nil, fmt.Errorf("advertised.listeners: %w", err)
	}
	if err := os.MkdirAll(b.dataDir, 0o755); err != nil {
		return nil, err
	}
	clusterID, err := readOrCreateMetaProperties(b.dataDir, b.nodeID)
	if err != nil {
		return nil, err
	}
	b.meta, err = metadata.Open(metadata.Options{
		Dir: filepath.Join(b.dataDir, metadataTopic+"-0"), NodeID: b.nodeID, ClusterID: clusterID, Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("opening the metadata log: %w", err)
	}
	b.logs, err = storage.OpenManager(b.dataDir, logger)
	if err != nil {
		b.meta.Close()
		return nil, err
	}
	b.pids, err = openProducerIDs(filepath.Join(b.dataDir, "producer-id-block"))
	if err != nil {
		b.close()
		return nil, err
	}
	if err := b.reconcile(); err != nil {
		b.close()
		return nil, err
	}
	b.setupServer(advAddr)
	if b.port == 0 { // listeners on port 0: advertise the port the kernel chose
		b.port = int32(b.listener.Addr().(*net.TCPAddr).Port)
	}
	if err := b.startCoordinators(); err != nil {
		b.close()
		return nil, err
	}
	started = true
	return b, nil
}

// setupServer prepares the wire server and the advertised address.
func (b *Broker) setupServer(adv string) {
	host, port, _ := net.SplitHostPort(adv)
	p, _ := strconv.Atoi(port)
	b.host, b.port = host, int32(p)
	b.server = &wire.Server{
		Versions:        wire.DefaultVersions(),
		MaxRequestBytes: b.cfg.Int32("socket.request.max.bytes"),
		NewRequest:      newRequest,
		Handler:         b,
		Logger:          b.logger,
	}
	for _, api := range mirrorproto.APIs() {
		if b.newMirrors == nil {
			break
		}
		switch api.Name {
		case "ReadMirrorStates", "WriteMirrorStates", "BumpLeaderEpochs":
			continue // inter-broker; single-node kmirror has no peers
		}
		b.server.Versions.Register(api.Key, wire.VersionRange{Min: api.MinVersion, Max: api.MaxVersion})
	}
}

// newRequest returns an empty standard request or mirror RPC for key.
func newRequest(key int16) kmsg.Request {
	if r := kmsg.RequestForKey(key); r != nil {
		return r
	}
	return mirrorproto.NewRequest(key)
}

// Addr is the advertised host:port.
func (b *Broker) Addr() string { return net.JoinHostPort(b.host, strconv.Itoa(int(b.port))) }

// Serve accepts connections on the listener New bound, until Shutdown.
func (b *Broker) Serve() error {
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		b.logs.RunBackground(b.ctx, b.cfg.Int64("log.retention.check.interval.ms"), 1000)
	}()
	if b.cfg.Bool("log.cleaner.enable") {
		b.bg.Add(1)
		go func() { defer b.bg.Done(); b.logs.RunCleaner(b.ctx, b.cfg.Int64("log.cleaner.backoff.ms")) }()
	}
	b.bg.Add(1)
	go func() { defer b.bg.Done(); b.watchMetadata() }()
	b.logger.Info("kmirror broker serving", "node.id", b.nodeID, "listener", b.listener.Addr().String(), "advertised", b.Addr(), "cluster.id", b.meta.Image().ClusterID, "log.dirs", b.dataDir)
	return b.server.Serve(b.listener)
}

// Shutdown answers in-flight requests, stops the mirror fetchers and the coordinators,
// flushes every log and writes the checkpoints (Kafka's controlled shutdown, single node).
func (b *Broker) Shutdown(ctx context.Context) {
	if b.server != nil {
		b.server.Shutdown(ctx)
	}
	b.close()
}

func (b *Broker) close() {
	b.cancel()
	if b.mirrors != nil {
		b.mirrors.Close()
	}
	if b.txns != nil {
		b.txns.Close()
	}
	if b.groups != nil {
		b.groups.Close()
	}
	b.bg.Wait()
	if b.logs != nil {
		if err := b.logs.Close(); err != nil {
			b.logger.Error("closing logs", "err", err)
		}
	}
	if b.meta != nil {
		b.meta.Close()
	}
}

// Handle dispatches one request to its handler (wire.Handler).
func (b *Broker) Handle(ctx context.Context, req *wire.Request) kmsg.Response {
	switch r := req.Body.(type) {
	case *kmsg.ProduceRequest:
		return b.handleProduce(ctx, r)
	case *kmsg.FetchRequest:
		return b.handleFetch(ctx, r)
	case *kmsg.ListOffsetsRequest:
		return b.handleListOffsets(r)
	case *kmsg.MetadataRequest:
		return b.handleMetadata(ctx, r)
	case *kmsg.DescribeClusterRequest:
		return b.handleDescribeCluster(r)
	case *kmsg.CreateTopicsRequest:
		return b.handleCreateTopics(ctx, r)
	case *kmsg.DeleteTopicsRequest:
		return b.handleDeleteTopics(ctx, r)
	case *kmsg.CreatePartitionsRequest:
		return b.handleCreatePartitions(ctx, r)
	case *kmsg.InitProducerIDRequest:
		return b.handleInitProducerID(r)
	case *kmsg.OffsetForLeaderEpochRequest:
		return b.handleOffsetForLeaderEpoch(r)
	case *kmsg.DeleteRecordsRequest:
		return b.handleDeleteRecords(r)
	case *kmsg.DescribeProducersRequest:
		return b.handleDescribeProducers(r)
	case *kmsg.DescribeConfigsRequest:
		return b.handleDescribeConfigs(r)
	case *kmsg.AlterConfigsRequest:
		return b.handleAlterConfigs(ctx, r)
	case *kmsg.IncrementalAlterConfigsRequest:
		return b.handleIncrementalAlterConfigs(ctx, r)
	case *kmsg.FindCoordinatorRequest:
		return b.handleFindCoordinator(r)
	case *kmsg.JoinGroupRequest:
		return b.groups.JoinGroup(group.WithClient(ctx, req.Header.ClientID, "/"+hostOf(req.Remote)), r)
	case *kmsg.SyncGroupRequest:
		return b.groups.SyncGroup(ctx, r)
	case *kmsg.HeartbeatRequest:
		return b.groups.Heartbeat(ctx, r)
	case *kmsg.LeaveGroupRequest:
		return b.groups.LeaveGroup(ctx, r)
	case *kmsg.OffsetCommitRequest:
		return b.groups.OffsetCommit(ctx, r)
	case *kmsg.OffsetFetchRequest:
		return b.groups.OffsetFetch(ctx, r)
	case *kmsg.OffsetDeleteRequest:
		return b.groups.OffsetDelete(ctx, r)
	case *kmsg.ListGroupsRequest:
		return b.groups.ListGroups(ctx, r)
	case *kmsg.DescribeGroupsRequest:
		return b.groups.DescribeGroups(ctx, r)
	case *kmsg.DeleteGroupsRequest:
		return b.groups.DeleteGroups(ctx, r)
	// Transactions (txn.go).
	case *kmsg.AddPartitionsToTxnRequest:
		return b.handleAddPartitionsToTxn(r)
	case *kmsg.AddOffsetsToTxnRequest:
		return b.handleAddOffsetsToTxn(r)
	case *kmsg.EndTxnRequest:
		return b.handleEndTxn(r)
	case *kmsg.TxnOffsetCommitRequest:
		return b.handleTxnOffsetCommit(r)
	case *kmsg.DescribeTransactionsRequest:
		return b.handleDescribeTransactions(r)
	case *kmsg.ListTransactionsRequest:
		return b.handleListTransactions(r)
	}
	if resp := b.handleMirrorRPC(ctx, req.Body); resp != nil {
		return resp
	}
	// The version table only lists keys with a handler; reaching here is a bug.
	b.logger.Error("no handler", "key", req.Header.Key)
	return nil
}

// ClusterID is the cluster ID from meta.properties (mirror.Local).
func (b *Broker) ClusterID() string { return b.meta.Image().ClusterID }

// NodeID is node.id (mirror.Local).
func (b *Broker) NodeID() int32 { return b.nodeID }

// Advertised is the advertised host:port (mirror.Local).
func (b *Broker) Advertised() string { return b.Addr() }

// Metadata is the metadata controller (mirror.Local).
func (b *Broker) Metadata() *metadata.Controller { return b.meta }

// Groups is the group coordinator (mirror.Local, for the group offset sync of spec §9).
func (b *Broker) Groups() *group.Coordinator { return b.groups }

// MirrorService returns the cluster mirroring service (internal/mirror's *Manager when
// wired by mirror.ForBroker), nil for a broker without it. Set before New returns.
func (b *Broker) MirrorService() Mirrors { return b.mirrors }

// errUnknownTopicOrPartition is returned by Log for a topic partition not in the image.
var errUnknownTopicOrPartition = errors.New("UNKNOWN_TOPIC_OR_PARTITION")

// Log returns the open log of topic/partition (mirror.Local). Logs are opened when the
// metadata image gains the topic; this waits up to 5 s for that.
func (b *Broker) Log(topic string, partition int32) (*storage.Log, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if l := b.partitionLog(topic, partition); l != nil {
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s-%d: %w", topic, partition, errUnknownTopicOrPartition)
		}
		if err := b.reconcile(); err != nil {
			return nil, err
		}
		if l := b.partitionLog(topic, partition); l != nil {
			return l, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// partitionLog returns the open log or nil.
func (b *Broker) partitionLog(topic string, partition int32) *storage.Log {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.topics[topic].log(partition)
}

// topicState returns the open state of a topic or nil.
func (b *Broker) topicState(topic string) *topicState {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.topics[topic]
}

// topicByID returns the open state of the topic with id or nil.
func (b *Broker) topicByID(id [16]byte) *topicState {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, ts := range b.topics {
		if ts.meta.ID == id {
			return ts
		}
	}
	return nil
}

// watchMetadata reconciles the open logs with every new metadata image.
func (b *Broker) watchMetadata() {
	ch := b.meta.Subscribe()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-ch:
			if err := b.reconcile(); err != nil {
				b.logger.Error("applying metadata to the logs", "err", err)
			}
		}
	}
}

// reconcile opens logs of topics and partitions in the image, applies topic configs,
// and deletes logs of topics that left the image (Kafka's ReplicaManager applying a
// metadata delta). Safe to call concurrently.
func (b *Broker) reconcile() error {
	im := b.meta.Image()
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, t := range im.Topics {
		ts := b.topics[name]
		if ts != nil && ts.meta.ID != t.ID {
			b.deleteTopicLogsLocked(name, ts)
			ts = nil
		}
		if ts == nil {
			ts = &topicState{}
			b.topics[name] = ts
		} else if ts.meta != t || int32(len(ts.logs)) < t.Partitions {
			// copy on write: request handlers read a topicState without b.mu
			ts = &topicState{meta: ts.meta, logs: append([]*storage.Log(nil), ts.logs...)}
			b.topics[name] = ts
		}
		cfg := b.storageConfig(t)
		for p := int32(len(ts.logs)); p < t.Partitions; p++ {
			l, err := b.logs.Open(name, p, t.ID, cfg)
			if err != nil {
				return fmt.Errorf("opening %s-%d: %w", name, p, err)
			}
			ts.logs = append(ts.logs, l)
		}
		if ts.meta == nil || !sameConfigs(ts.meta.Configs, t.Configs) {
			for _, l := range ts.logs {
				l.SetConfig(cfg)
			}
		}
		if ts.meta != t { // an unchanged topicState is shared with readers: no write
			ts.meta = t
		}
	}
	for name, ts := range b.topics {
		if _, ok := im.Topics[name]; !ok {
			b.deleteTopicLogsLocked(name, ts)
		}
	}
	// Partition directories on disk that no image topic owns (a topic deleted while
	// the broker was down) are removed, as Kafka's LogManager does at start-up.
	existing, err := b.logs.Existing()
	if err != nil {
		return err
	}
	for _, tp := range existing {
		if tp.Topic == metadataTopic {
			continue
		}
		t, ok := im.Topics[tp.Topic]
		if !ok || tp.Partition >= t.Partitions {
			b.logger.Info("deleting the log of a topic partition not in the metadata", "topic", tp.Topic, "partition", tp.Partition)
			if err := b.logs.Delete(tp.Topic, tp.Partition); err != nil {
				b.logger.Warn("deleting log", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
		}
	}
	return nil
}

func (b *Broker) deleteTopicLogsLocked(name string, ts *topicState) {
	for p := range ts.logs {
		if err := b.logs.Delete(name, int32(p)); err != nil {
			b.logger.Warn("deleting log", "topic", name, "partition", p, "err", err)
		}
	}
	delete(b.topics, name)
}

func sameConfigs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// hostOf is the IP of a remote address.
func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return a.String()
}

// listenerAddr turns "PLAINTEXT://host:port" (the first of a list) into host:port.
func listenerAddr(l string) (string, error) {
	l = strings.TrimSpace(strings.Split(l, ",")[0])
	if i := strings.Index(l, "://"); i >= 0 {
		proto := l[:i]
		if !strings.EqualFold(proto, "PLAINTEXT") {
			return "", fmt.Errorf("listener %q: only PLAINTEXT listeners are supported", l)
		}
		l = l[i+3:]
	}
	host, port, err := net.SplitHostPort(l)
	if err != nil {
		return "", fmt.Errorf("listener %q: %v", l, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("listener %q: bad port", l)
	}
	return net.JoinHostPort(host, port), nil
}
