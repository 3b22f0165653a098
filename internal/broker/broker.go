// Package broker holds kmirror's request handlers, one file per API (each file's header
// names the versions served), over the broker's state: the metadata image, the hosted
// partitions (internal/partition's ReplicaManager), the group and transaction
// coordinators and the mirror manager. It follows Apache Kafka's BrokerServer and
// KafkaApis: requests for a partition this broker does not lead are answered
// NOT_LEADER_OR_FOLLOWER, and the broker registers and heartbeats with the active
// controller (lifecycle.go).
package broker

import (
	"context"
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
	"github.com/kmirror/kmirror/internal/controller"
	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/partition"
	"github.com/kmirror/kmirror/internal/storage"
	"github.com/kmirror/kmirror/internal/txn"
	"github.com/kmirror/kmirror/internal/wire"
)

// OffsetsTopic is Kafka's internal topic for group offsets and metadata.
const OffsetsTopic = "__consumer_offsets"

// metadataTopic names the raft metadata log's directory (<log.dirs>/__cluster_metadata-0),
// as in Kafka's KRaft layout; it is not a partition log.
const metadataTopic = "__cluster_metadata"

// startTimeout bounds the broker's start-up steps that wait for the controller
// (registration, unfencing).
const startTimeout = 30 * time.Second

// Broker is one kmirror broker.
type Broker struct {
	cfg       *config.Values
	nodeID    int32
	host      string
	port      int32
	rack      string
	endpoints []metadata.Endpoint // advertised listeners, as registered
	logger    *slog.Logger
	dataDir   string
	listener  net.Listener

	meta       *metadata.Controller
	ctrl       *controller.Controller
	channel    controllerChannel
	life       *lifecycle
	logs       *storage.Manager
	rm         *partition.ReplicaManager
	groups     *group.Coordinator
	txns       *txn.Coordinator
	mirrors    Mirrors
	newMirrors NewMirrorsFunc
	pids       *producerIDs
	server     *wire.Server

	sessionsOnce sync.Once
	sessions     *fetchSessionCache // fetch sessions (KIP-227), created on first Fetch

	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup
}

// New validates cfg (server.properties keys with Kafka's names), creates or reads
// meta.properties, opens the metadata log and the partition logs (recovering them),
// starts the controller, registers with it and waits to be unfenced, loads the group
// coordinator and starts the mirror manager. It does not accept connections until Serve.
//
// newMirrors builds the cluster mirroring service; nil runs a broker without it.
func New(cfg *config.Values, logger *slog.Logger, newMirrors NewMirrorsFunc) (*Broker, error) {
	b := &Broker{cfg: cfg, logger: logger, newMirrors: newMirrors}
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
			b.close()
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
	if b.logs, err = storage.OpenManager(b.dataDir, logger); err != nil {
		return nil, err
	}
	b.setupServer(advAddr)
	if b.port == 0 { // listeners on port 0: advertise the port the kernel chose
		b.port = int32(b.listener.Addr().(*net.TCPAddr).Port)
	}
	b.endpoints = []metadata.Endpoint{{Name: "PLAINTEXT", Host: b.host, Port: b.port, SecurityProtocol: "PLAINTEXT"}}
	if err := b.startReplicas(); err != nil {
		return nil, err
	}
	b.ctrl = controller.New(b.meta, controller.Options{
		NodeID:          b.nodeID,
		SessionTimeout:  time.Duration(cfg.Int64("broker.session.timeout.ms")) * time.Millisecond,
		Combined:        true,
		AdoptUnassigned: true,
		AdoptEpoch:      b.adoptEpoch,
		Logger:          logger,
	})
	b.goBackground(func() { b.ctrl.Run(b.ctx) })
	b.channel = localChannel{b.ctrl}
	if b.pids, err = openProducerIDs(b, filepath.Join(b.dataDir, "producer-id-block")); err != nil {
		return nil, err
	}
	if err := b.joinCluster(); err != nil {
		return nil, err
	}
	if err := b.startCoordinators(); err != nil {
		return nil, err
	}
	started = true
	return b, nil
}

// startReplicas deletes stray logs, opens the partitions the image gives this broker and
// follows every later image (ReplicaManager.Apply).
func (b *Broker) startReplicas() error {
	b.rm = partition.NewReplicaManager(partition.Options{
		NodeID: b.nodeID, Logs: b.logs, Config: b.storageConfig, OnChange: b.onLeadershipChange, Logger: b.logger,
	})
	im := b.meta.Image()
	if err := b.rm.DeleteStray(im, func(topic string) bool { return topic == metadataTopic }); err != nil {
		return err
	}
	if err := b.rm.Apply(im); err != nil {
		b.logger.Error("opening partition logs", "err", err)
	}
	sub := b.meta.Subscribe()
	b.goBackground(func() {
		for {
			select {
			case <-b.ctx.Done():
				return
			case _, ok := <-sub:
				if !ok {
					return
				}
				if err := b.rm.Apply(b.meta.Image()); err != nil {
					b.logger.Error("applying metadata to the partitions", "err", err)
				}
			}
		}
	})
	return nil
}

// adoptEpoch is the leader epoch a partition from a release before clusters keeps when
// the controller assigns it to this broker: its log's (batch epochs and raises).
func (b *Broker) adoptEpoch(topic string, p int32) int32 {
	if part := b.rm.Get(topic, p); part != nil {
		return part.Log().LeaderEpoch()
	}
	return 0
}

// joinCluster registers with the controller, waits to be unfenced and heartbeats from
// then on.
func (b *Broker) joinCluster() error {
	b.life = newLifecycle(b, time.Duration(b.cfg.Int64("broker.heartbeat.interval.ms"))*time.Millisecond)
	ctx, cancel := context.WithTimeout(b.ctx, startTimeout)
	defer cancel()
	if err := b.life.register(ctx); err != nil {
		return err
	}
	if err := b.life.awaitUnfenced(ctx); err != nil {
		return err
	}
	b.goBackground(func() { b.life.run(b.ctx) })
	return nil
}

// onLeadershipChange tells the coordinators which of their partitions this broker leads
// now (Kafka's KafkaApis.onLeadershipChange).
func (b *Broker) onLeadershipChange(partition.Change) {}

func (b *Broker) goBackground(fn func()) {
	b.bg.Add(1)
	go func() { defer b.bg.Done(); fn() }()
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
	b.goBackground(func() {
		b.logs.RunBackground(b.ctx, b.cfg.Int64("log.retention.check.interval.ms"), 1000)
	})
	if b.cfg.Bool("log.cleaner.enable") {
		b.goBackground(func() { b.logs.RunCleaner(b.ctx, b.cfg.Int64("log.cleaner.backoff.ms")) })
	}
	b.logger.Info("kmirror broker serving", "node.id", b.nodeID, "listener", b.listener.Addr().String(), "advertised", b.Addr(), "cluster.id", b.meta.Image().ClusterID, "log.dirs", b.dataDir)
	return b.server.Serve(b.listener)
}

// Shutdown answers in-flight requests, stops the mirror fetchers and the coordinators,
// flushes every log and writes the checkpoints (Kafka's controlled shutdown).
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
	if b.rm != nil {
		b.rm.Stop()
	}
	if b.logs != nil {
		if err := b.logs.Close(); err != nil {
			b.logger.Error("closing logs", "err", err)
		}
	}
	if b.channel != nil {
		b.channel.Close()
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

// Log returns the log of topic/partition once this broker leads it (mirror.Local, the
// coordinators), waiting up to 5 s for the image that makes it leader.
func (b *Broker) Log(topic string, p int32) (*storage.Log, error) {
	part, err := b.Partition(topic, p)
	if err != nil {
		return nil, err
	}
	return part.Log(), nil
}

// Partition returns topic/partition once this broker leads it, waiting up to 5 s for the
// image that makes it leader. Errors: partition.ErrUnknownTopicOrPartition,
// partition.ErrNotLeader (wrapped with the partition's name).
func (b *Broker) Partition(topic string, p int32) (*partition.Partition, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	part, err := b.rm.AwaitLeader(ctx, topic, p)
	if err != nil {
		return nil, fmt.Errorf("%s-%d: %w", topic, p, err)
	}
	return part, nil
}

// leader returns the partition this broker leads, with the handlers' errors:
// partition.ErrUnknownTopicOrPartition or partition.ErrNotLeader.
func (b *Broker) leader(topic string, p int32) (*partition.Partition, error) {
	return b.rm.Leader(topic, p)
}

// leaderByID is leader for a topic given by topic ID.
func (b *Broker) leaderByID(id [16]byte, p int32) (*partition.Partition, error) {
	t := b.rm.Image().TopicsByID[id]
	if t == nil {
		return nil, partition.ErrUnknownTopicOrPartition
	}
	return b.rm.Leader(t.Name, p)
}

// applyNow applies the latest image to the hosted partitions at once (after this broker
// wrote a metadata change it is about to use).
func (b *Broker) applyNow() {
	if err := b.rm.Apply(b.meta.Image()); err != nil {
		b.logger.Error("applying metadata to the partitions", "err", err)
	}
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
