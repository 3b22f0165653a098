// Package broker holds kmirror's request handlers, one file per API named for it
// (produce.go, joingroup.go, ...) that registers the API's versions and handler with the
// registry of apis.go, over the broker's state: the metadata image, the hosted
// partitions (internal/partition's ReplicaManager), the group and transaction
// coordinators and the mirror manager. It follows Apache Kafka's BrokerServer and
// KafkaApis: requests for a partition this broker does not lead are answered
// NOT_LEADER_OR_FOLLOWER, and the broker registers and heartbeats with the active
// controller (lifecycle.go).
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
	"github.com/kmirror/kmirror/internal/controller"
	"github.com/kmirror/kmirror/internal/group"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/netmux"
	"github.com/kmirror/kmirror/internal/partition"
	"github.com/kmirror/kmirror/internal/replication"
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

// Broker is one kmirror node: a broker, a controller, or both (process.roles).
type Broker struct {
	cfg       *config.Values
	node      *config.Node
	nodeID    int32
	host      string // the first advertised listener's host and port
	port      int32
	rack      string
	endpoints []metadata.Endpoint // advertised listeners, as registered
	logger    *slog.Logger
	dataDir   string
	clusterID string // from meta.properties; the image's once the quorum wrote it

	listeners []*listener   // broker listeners (empty on a controller-only node)
	ctrlLn    *listener     // the controller listener (nil on a broker-only or one-node node)
	muxes     []*netmux.Mux // the listeners that also carry raft streams

	meta       *metadata.Controller
	ctrl       *controller.Controller // nil without the controller role
	channel    controllerChannel
	life       *lifecycle
	fetchers   *replication.Manager // the replica fetchers of the partitions this broker follows
	logs       *storage.Manager
	rm         *partition.ReplicaManager
	groups     *group.Coordinator
	txns       *txn.Coordinator
	mirrors    Mirrors
	newMirrors NewMirrorsFunc
	pids       *producerIDs
	peers      peers
	coordMu    sync.Mutex // serialises coordinator elections with the coordinators' start
	clusterClientState
	authorization // authorizer.class.name (authz.go)

	sessionsOnce sync.Once
	sessions     *fetchSessionCache // fetch sessions (KIP-227), created on first Fetch

	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup
}

// listener is one bound listener and the wire server that serves it.
type listener struct {
	cfg    config.Listener
	ln     net.Listener // what the server accepts from (a netmux sub-listener when shared)
	server *wire.Server
}

// New validates cfg (server.properties keys with Kafka's names), reads meta.properties
// (a one-node cluster without process.roles formats itself), binds the listeners, opens
// the metadata log and the partition logs (recovering them), starts the controller on a
// controller node and, on a broker, registers with the active controller, waits to be
// unfenced and starts the coordinators and the mirror manager. It does not accept client
// connections until Serve; the controller listener serves at once (the other nodes need
// it to start). A node of a multi-node quorum waits here for the quorum to elect an
// active controller.
//
// newMirrors builds the cluster mirroring service; nil runs a broker without it.
func New(cfg *config.Values, logger *slog.Logger, newMirrors NewMirrorsFunc) (*Broker, error) {
	node, err := config.ParseNode(cfg)
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, node: node, nodeID: node.NodeID, rack: node.Rack, logger: logger, newMirrors: newMirrors}
	b.peers.b = b
	if b.authorization.authz, err = newAuthorizer(cfg); err != nil {
		return nil, err
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if b.dataDir, err = config.LogDir(cfg); err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			b.close()
		}
	}()
	// Bind first: a busy port fails before anything is written to log.dirs.
	if err := b.bindListeners(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(b.dataDir, 0o755); err != nil {
		return nil, err
	}
	if b.clusterID, err = config.CheckFormatted(b.dataDir, node, ""); err != nil {
		return nil, err
	}
	if err := b.openMetadata(b.clusterID); err != nil {
		return nil, fmt.Errorf("opening the metadata log: %w", err)
	}
	if node.Roles.Broker {
		// Before the controller: a combined node's controller knows its broker's incarnation.
		b.life = newLifecycle(b, time.Duration(b.cfg.Int64("broker.heartbeat.interval.ms"))*time.Millisecond,
			time.Duration(b.cfg.Int64("broker.session.timeout.ms"))*time.Millisecond)
	}
	if node.Roles.Controller {
		b.startController()
	}
	if !node.Roles.Broker {
		started = true
		return b, nil
	}
	if soft, hard, err := storage.RaiseFileLimit(); err == nil {
		logger.Info("file descriptor limit", "RLIMIT_NOFILE", soft, "hard", hard)
	}
	if b.logs, err = storage.OpenManager(b.dataDir, logger); err != nil {
		return nil, err
	}
	if err := b.awaitQuorum(); err != nil {
		return nil, err
	}
	if err := b.startReplicas(); err != nil {
		return nil, err
	}
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

// bindListeners binds every listener: the broker listeners (one wire server each) and the
// controller listener, which shares its port between the Kafka-protocol controller RPCs and
// the raft streams of the metadata quorum (netmux). A broker-only node's raft streams come
// on its inter-broker listener: the active controller's raft pushes the log to it.
func (b *Broker) bindListeners() error {
	ctrlName := ""
	if l, ok := b.node.ControllerListener(); ok {
		ctrlName = l.Name
	}
	for _, lc := range b.node.Listeners {
		ln, err := net.Listen("tcp", lc.Addr())
		if err != nil {
			return fmt.Errorf("listeners: %s: %w", lc, err)
		}
		if lc.Port == 0 { // port 0: the port the kernel chose, advertised as such
			lc.Port = ln.Addr().(*net.TCPAddr).Port
		}
		l := &listener{cfg: lc, ln: ln}
		if lc.Name == ctrlName {
			b.ctrlLn = l
		} else if b.node.Roles.Broker {
			b.listeners = append(b.listeners, l)
		} else {
			ln.Close()
			continue
		}
	}
	for _, adv := range b.node.AdvertisedListeners {
		e := metadata.Endpoint{Name: adv.Name, Host: adv.Host, Port: int32(adv.Port), SecurityProtocol: adv.SecurityProtocol}
		for _, l := range b.listeners {
			if l.cfg.Name == adv.Name && adv.Port == 0 {
				e.Port = int32(l.cfg.Port)
			}
			if l.cfg.Name == adv.Name && e.Host == "" {
				e.Host = l.cfg.Host
			}
		}
		if e.Host == "" {
			e.Host, _ = os.Hostname()
		}
		b.endpoints = append(b.endpoints, e)
	}
	if len(b.endpoints) > 0 {
		b.host, b.port = b.endpoints[0].Host, b.endpoints[0].Port
	}
	overrides, err := wire.ParseIPOverrides(b.cfg.String("max.connections.per.ip.overrides"))
	if err != nil {
		return err
	}
	limits := &wire.Limits{MaxConnections: int(b.cfg.Int32("max.connections")), MaxConnectionsPerIP: int(b.cfg.Int32("max.connections.per.ip")),
		PerIPOverrides: overrides, QueuedMaxRequestBytes: b.cfg.Int64("queued.max.request.bytes")}
	for _, l := range b.listeners {
		l.server = b.newServer(brokerHandler{b, l.cfg.Name}, brokerAPIs.versions(b))
		l.server.Limits = limits // one quota across the broker listeners, as Kafka's
		// Kafka's ConnectionQuotas: with more than one listener, max.connections never
		// refuses the inter-broker one, so clients cannot starve replication.
		l.server.Protected = len(b.listeners) > 1 && l.cfg.Name == b.interBrokerListenerName()
	}
	if b.ctrlLn != nil {
		b.ctrlLn.server = b.newServer(controllerHandler{b}, controllerAPIs.versions(b))
	}
	all := b.listeners
	if b.ctrlLn != nil {
		all = append(all[:len(all):len(all)], b.ctrlLn)
	}
	for _, l := range all {
		sec, err := b.listenerSecurity(l.cfg)
		if err != nil {
			return err // New closes the listeners
		}
		l.server.Security = sec
	}
	if !b.node.Legacy && b.node.Roles.Broker {
		if _, err := b.clientOpts(b.interBrokerListener()); err != nil {
			return err // the brokers could not reach each other
		}
	}
	return nil
}

func (b *Broker) newServer(h wire.Handler, v *wire.Versions) *wire.Server {
	return &wire.Server{Versions: v, MaxRequestBytes: b.cfg.Int32("socket.request.max.bytes"), NewRequest: newRequest, Handler: h, Logger: b.logger}
}

// openMetadata opens the metadata log: the one-node mode (in memory, this node its only
// voter) without a quorum config, else a voter or an observer of controller.quorum.voters
// over TCP.
func (b *Broker) openMetadata(clusterID string) error {
	opts := metadata.Options{
		Dir: filepath.Join(b.dataDir, metadataTopic+"-0"), NodeID: b.nodeID, ClusterID: clusterID, Logger: b.logger,
	}
	var err error
	if opts.Bootstrap, err = metadata.ReadBootstrap(b.dataDir); err != nil {
		return err
	}
	if !b.node.Legacy {
		var raftOn *listener
		if b.node.Roles.Controller {
			raftOn = b.ctrlLn
		} else {
			for _, l := range b.listeners {
				if l.cfg.Name == b.node.InterBrokerListenerName {
					raftOn = l
				}
			}
			for _, e := range b.endpoints {
				if e.Name == b.node.InterBrokerListenerName {
					opts.AdvertisedRaftAddr = net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
				}
			}
		}
		if raftOn == nil {
			return fmt.Errorf("no listener to carry the metadata quorum's raft streams (controller.listener.names, inter.broker.listener.name)")
		}
		mux := netmux.New(raftOn.ln, b.logger)
		b.muxes = append(b.muxes, mux)
		opts.RaftListener = mux.Claim(netmux.RaftByte)
		raftOn.ln = mux.Default()
		go mux.Serve()
		for _, v := range b.node.Voters {
			opts.Voters = append(opts.Voters, metadata.Voter{ID: v.ID, Addr: v.Addr()})
		}
		opts.ControllerRole = b.node.Roles.Controller
		opts.ElectionTimeout = time.Duration(b.cfg.Int64("controller.quorum.election.timeout.ms")) * time.Millisecond
		opts.FetchTimeout = time.Duration(b.cfg.Int64("controller.quorum.fetch.timeout.ms")) * time.Millisecond
		opts.Forward = b.forwardRecords
	}
	b.meta, err = metadata.Open(opts)
	return err
}

// forwardRecords carries a metadata write of this node to the active controller
// (metadata.Options.Forward).
func (b *Broker) forwardRecords(ctx context.Context, batch []byte) (uint64, error) {
	if b.channel == nil {
		return 0, fmt.Errorf("%w: the controller channel is not open yet", metadata.ErrNotController)
	}
	resp, err := b.channel.Request(ctx, &controller.ApplyRecordsRequest{Batch: batch})
	if err != nil {
		return 0, fmt.Errorf("%w: %v", metadata.ErrNotController, err)
	}
	r := resp.(*controller.ApplyRecordsResponse)
	if err := controller.ApplyError(r); err != nil {
		return 0, err
	}
	return uint64(r.Offset), nil
}

// startController runs this node's controller (the active one while it leads the quorum)
// and serves the controller listener.
func (b *Broker) startController() {
	var incarnation metadata.TopicID
	if b.life != nil {
		incarnation = b.life.incarnation
	}
	b.ctrl = controller.New(b.meta, controller.Options{
		NodeID:              b.nodeID,
		SessionTimeout:      time.Duration(b.cfg.Int64("broker.session.timeout.ms")) * time.Millisecond,
		HeartbeatInterval:   time.Duration(b.cfg.Int64("broker.heartbeat.interval.ms")) * time.Millisecond,
		Combined:            b.node.Roles.Broker,
		Incarnation:         incarnation,
		AdoptUnassigned:     b.node.Legacy,
		AdoptEpoch:          b.adoptEpoch,
		InterBrokerListener: b.interBrokerListenerName(),
		Logger:              b.logger,

		UncleanLeaderElection:        b.cfg.Bool("unclean.leader.election.enable"),
		AutoLeaderRebalance:          b.cfg.Bool("auto.leader.rebalance.enable"),
		LeaderImbalanceCheckInterval: time.Duration(b.cfg.Int64("leader.imbalance.check.interval.seconds")) * time.Second,
	})
	b.goBackground(func() { b.ctrl.Run(b.ctx) })
	if b.ctrlLn != nil {
		b.goBackground(func() { b.ctrlLn.server.Serve(b.ctrlLn.ln) })
	}
}

// interBrokerListenerName is the listener brokers reach each other on: the node's own, or
// on a controller-only node inter.broker.listener.name (PLAINTEXT when unset), which its
// controller needs to reach broker-only nodes as observers of the quorum.
func (b *Broker) interBrokerListenerName() string {
	if b.node.InterBrokerListenerName != "" {
		return b.node.InterBrokerListenerName
	}
	if s := strings.TrimSpace(b.cfg.String("inter.broker.listener.name")); s != "" {
		return strings.ToUpper(s)
	}
	return config.ProtocolPlaintext
}

// awaitQuorum opens the controller channel and, on a multi-node quorum, waits until an
// active controller exists and this node's image holds the log it had at start (logging
// while it waits); a broker-only node registers first, so that the active controller
// adds it to the quorum. A node of another cluster fails here.
func (b *Broker) awaitQuorum() error {
	if b.node.Legacy {
		b.channel = localChannel{b.ctrl}
		return nil
	}
	var voters []metadata.Voter
	for _, v := range b.node.Voters {
		voters = append(voters, metadata.Voter{ID: v.ID, Addr: v.Addr()})
	}
	b.channel = newRemoteChannel(b.nodeID, b.ctrl, func() (int32, bool) {
		id, _, ok := b.meta.Leader()
		return id, ok
	}, voters)
	if !b.node.Roles.Controller {
		// A broker-only node is an observer: the quorum's raft pushes the log to it, and
		// the active controller adds it when it registers (Kafka's brokers register
		// before they catch up too). Until then it knows no leader and has no image.
		if err := b.life.register(b.ctx); err != nil {
			return err
		}
	}
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		_, _, err := b.meta.WaitForLeader(ctx)
		if err == nil {
			err = b.meta.WaitReplayed(ctx)
		}
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, metadata.ErrInconsistentClusterID), b.ctx.Err() != nil:
			return err
		}
		b.logger.Warn("waiting for the metadata quorum to elect an active controller", "controller.quorum.voters", b.cfg.String("controller.quorum.voters"), "err", err)
	}
}

// startReplicas deletes stray logs, opens the partitions the image gives this broker and
// follows every later image (ReplicaManager.Apply).
func (b *Broker) startReplicas() error {
	b.fetchers = b.newFetchers()
	b.rm = partition.NewReplicaManager(b.replicaOptions(partition.Options{
		NodeID: b.nodeID, Logs: b.logs, Config: b.storageConfig, OnChange: b.onLeadershipChange, Logger: b.logger,
	}))
	b.goBackground(func() { b.rm.Run(b.ctx) })
	// Subscribed before the image is read: an image applied by the metadata log while
	// the partitions open (a restart's catch-up) wakes the loop below. Subscribed after,
	// its notification was lost, and on a quiet log (the controller writes nothing
	// until this broker, fenced, reports that offset) the replica manager's image —
	// the offset the heartbeats report — never caught up, so the broker was never
	// unfenced.
	sub := b.meta.Subscribe()
	im := b.meta.Image()
	if err := b.rm.DeleteStray(im, func(topic string) bool { return topic == metadataTopic }); err != nil {
		return err
	}
	segs, err := b.logs.SegmentFiles()
	if err != nil {
		return err
	}
	if err := storage.CheckFileBudget(fmt.Sprintf("opening the %d segments of log directory %s", segs, b.dataDir), segs); err != nil {
		return err
	}
	if err := b.rm.Apply(im); err != nil {
		b.logger.Error("opening partition logs", "err", err)
	}
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

// joinCluster registers with the controller (unless awaitQuorum did), waits to be
// unfenced and heartbeats from then on.
func (b *Broker) joinCluster() error {
	ctx, cancel := b.ctx, context.CancelFunc(func() {})
	if b.node.Legacy { // its own controller answers at once
		ctx, cancel = context.WithTimeout(b.ctx, startTimeout)
	}
	defer cancel()
	if b.life.BrokerEpoch() < 0 {
		if err := b.life.register(ctx); err != nil {
			return err
		}
	}
	if err := b.life.awaitUnfenced(ctx); err != nil {
		return err
	}
	b.goBackground(func() { b.life.run(b.ctx) })
	return nil
}

// onLeadershipChange tells the coordinators which of their partitions this broker leads
// now (Kafka's KafkaApis.onLeadershipChange → onElection / onResignation), with the
// partition's leader epoch as the coordinator epoch.
func (b *Broker) onLeadershipChange(ch partition.Change) {
	b.followChanges(ch)
	b.coordMu.Lock()
	defer b.coordMu.Unlock()
	for _, p := range ch.Resigned {
		switch {
		case p.Topic() == OffsetsTopic && b.groups != nil:
			b.groups.OnResignation(p.Index(), p.LeaderEpoch())
		case p.Topic() == txn.TopicName && b.txns != nil:
			b.txns.OnResignation(p.Index(), p.LeaderEpoch())
		case p.Topic() == mirrorStateTopic && b.mirrors != nil:
			b.mirrors.StatePartitionResigned(p.Index())
		}
	}
	for _, p := range ch.Leaders {
		b.electCoordinator(p)
	}
	if b.mirrors != nil {
		b.mirrors.LeadershipChanged()
	}
}

// mirrorStateTopic is internal/mirror's StateTopic (the broker does not import the
// mirror package).
const mirrorStateTopic = "__mirror_state"

// electCoordinator makes this broker the coordinator of a partition of an internal topic
// it leads. coordMu held.
func (b *Broker) electCoordinator(p *partition.Partition) {
	switch {
	case p.Topic() == OffsetsTopic && b.groups != nil:
		b.groups.OnElection(p.Index(), p.LeaderEpoch())
	case p.Topic() == txn.TopicName && b.txns != nil:
		b.txns.OnElection(p.Index(), p.LeaderEpoch())
	case p.Topic() == mirrorStateTopic && b.mirrors != nil:
		b.mirrors.StatePartitionElected(p.Index(), p.LeaderEpoch())
	}
}

// electLedCoordinators elects the coordinators of topic's partitions that this broker
// leads now (a coordinator that starts after the leaderships were applied). coordMu
// held.
func (b *Broker) electLedCoordinators(topic string) {
	for _, p := range b.rm.Partitions() {
		if p.Topic() == topic && p.IsLeader() {
			b.electCoordinator(p)
		}
	}
}

func (b *Broker) goBackground(fn func()) {
	b.bg.Add(1)
	go func() { defer b.bg.Done(); fn() }()
}

// newRequest returns an empty standard request, mirror RPC or ApplyRecords for key.
func newRequest(key int16) kmsg.Request {
	if r := kmsg.RequestForKey(key); r != nil {
		return r
	}
	if key == controller.ApplyRecordsKey {
		return &controller.ApplyRecordsRequest{}
	}
	return mirrorproto.NewRequest(key)
}

// Addr is the advertised host:port of the first broker listener.
func (b *Broker) Addr() string { return net.JoinHostPort(b.host, strconv.Itoa(int(b.port))) }

// Serve accepts client connections on the broker listeners New bound, until Shutdown; on a
// controller-only node it waits for Shutdown. It returns the error of a listener that
// failed, or the metadata quorum's when this node must stop serving (a node of another
// cluster: metadata.Controller.Failed), after stopping the listeners; the caller then
// calls Shutdown.
func (b *Broker) Serve() error {
	if b.logs != nil {
		b.goBackground(func() {
			b.logs.RunBackground(b.ctx, storage.BackgroundConfig{
				RetentionCheckMs:          b.cfg.Int64("log.retention.check.interval.ms"),
				FlushCheckMs:              1000,
				HighWatermarkCheckpointMs: b.cfg.Int64("replica.high.watermark.checkpoint.interval.ms"),
				ProducerExpirationCheckMs: b.cfg.Int64("producer.id.expiration.check.interval.ms"),
				ProducerExpirationMs:      b.cfg.Int64("producer.id.expiration.ms"),
			})
		})
		if b.cfg.Bool("log.cleaner.enable") {
			b.goBackground(func() { b.logs.RunCleaner(b.ctx, b.cfg.Int64("log.cleaner.backoff.ms")) })
		}
	}
	what := "kmirror broker serving"
	if !b.node.Roles.Broker {
		what = "kmirror controller serving"
	}
	b.logger.Info(what, "node.id", b.nodeID, "process.roles", b.node.Roles.String(), "advertised", fmt.Sprint(b.endpoints),
		"cluster.id", b.meta.Image().ClusterID, "log.dirs", b.dataDir)
	errc := make(chan error, len(b.listeners))
	for _, l := range b.listeners {
		go func() { errc <- l.server.Serve(l.ln) }()
	}
	var first error
	stop := func(err error) {
		if first == nil {
			first = err
			for _, l := range b.listeners {
				l.server.Shutdown(context.Background())
			}
		}
	}
	failed, done := b.meta.Failed(), b.ctx.Done()
	for pending := len(b.listeners); pending > 0 || (first == nil && len(b.listeners) == 0); {
		select {
		case err := <-errc:
			pending--
			if err != nil {
				stop(err)
			}
		case <-failed:
			failed = nil
			stop(b.meta.Err())
		case <-done:
			done = nil
			if len(b.listeners) == 0 {
				return nil
			}
		}
	}
	return first
}

// Shutdown moves this broker's leaderships away first (a controlled shutdown, in a
// multi-node cluster), then answers in-flight requests, stops the mirror fetchers and the
// coordinators, flushes every log and writes the checkpoints.
func (b *Broker) Shutdown(ctx context.Context) {
	if b.life != nil && !b.node.Legacy {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		b.life.controlledShutdown(sctx)
		cancel()
	}
	b.Stop(ctx)
}

// Stop shuts the node down as Shutdown does, without the controlled shutdown: for a whole
// cluster stopping at once, whose quorum cannot commit its last nodes' controlled
// shutdowns (a clean stop still records its broker epoch, so that the node registers
// again at once when it is back).
func (b *Broker) Stop(ctx context.Context) {
	for _, l := range b.listeners {
		if l.server != nil {
			l.server.Shutdown(ctx)
		}
	}
	if b.ctrlLn != nil && b.ctrlLn.server != nil {
		b.ctrlLn.server.Shutdown(ctx)
	}
	b.close()
}

func (b *Broker) close() {
	b.cancel()
	if b.mirrors != nil {
		// HoldOnLead stays installed: releasing the holds no runtime decided would
		// advance HWs over untrusted tails before the HW checkpoint; rm.Stop drops
		// them without advancing
		b.mirrors.Close()
	}
	if b.txns != nil {
		b.txns.Close()
	}
	if b.groups != nil {
		b.groups.Close()
	}
	for _, l := range append(b.listeners, b.ctrlLn) {
		if l != nil && l.ln != nil {
			l.ln.Close()
		}
	}
	for _, m := range b.muxes {
		m.Close()
	}
	b.bg.Wait()
	if b.fetchers != nil {
		b.fetchers.Close()
	}
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
	b.peers.close()
	if b.cluster != nil {
		b.cluster.Close()
	}
	if b.meta != nil {
		b.meta.Close()
	}
}

// brokerHandler serves one broker listener; the listener's name selects the endpoints
// Metadata answers (Kafka answers each listener with its own endpoints).
type brokerHandler struct {
	b    *Broker
	name string
}

type listenerKey struct{}

func (h brokerHandler) Handle(ctx context.Context, req *wire.Request) kmsg.Response {
	return h.b.Handle(context.WithValue(ctx, listenerKey{}, h.name), req)
}

// listenerOf is the name of the listener a request came on (the first broker listener
// when not known).
func (b *Broker) listenerOf(ctx context.Context) string {
	if n, ok := ctx.Value(listenerKey{}).(string); ok {
		return n
	}
	return b.clientListener()
}

// Handle dispatches one request to its handler (wire.Handler), from the registry of the
// broker listeners (apis.go).
func (b *Broker) Handle(ctx context.Context, req *wire.Request) kmsg.Response {
	return brokerAPIs.handle(b, ctx, req)
}

// ClusterID is the cluster ID from meta.properties (mirror.Local).
func (b *Broker) ClusterID() string {
	if id := b.meta.Image().ClusterID; id != "" {
		return id
	}
	return b.clusterID
}

// NodeID is node.id (mirror.Local).
func (b *Broker) NodeID() int32 { return b.nodeID }

// Advertised is the advertised host:port (mirror.Local).
func (b *Broker) Advertised() string { return b.Addr() }

// Metadata is the metadata controller (mirror.Local).
func (b *Broker) Metadata() *metadata.Controller { return b.meta }

// MirrorService returns the cluster mirroring service (internal/mirror's *Manager when
// wired by cmd/kmirror), nil for a broker without it. Set before New returns.
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

// ActiveController reports whether this node is the active controller of its cluster.
func (b *Broker) ActiveController() bool { return b.ctrl != nil && b.ctrl.Active() }
