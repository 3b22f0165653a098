// Package metadata holds kmirror's cluster metadata: an ordered log of records (topics,
// configs, cluster mirrors, desired mirror-topic states) applied to an immutable in-memory
// Image, replicated with hashicorp/raft and kept on disk in a raft-boltdb log store plus
// snapshots, the way Apache Kafka's KRaft controller (QuorumController with its
// MetadataImage) works. See architecture section 4 and cluster.md section 1.
//
// The metadata quorum is either one node with an in-memory transport (no
// controller.quorum.voters: today's one-node cluster) or the voters of
// controller.quorum.voters plus any number of observers (broker-only nodes, raft
// non-voters), talking raft over TCP through a netmux.Mux on each node's listener. The raft
// leader is the active controller; the raft term is the metadata log's leader epoch.
package metadata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Tuning of the raft log.
const (
	// raftTimeout is raft's heartbeat, election and leader lease timeout: short, so that a
	// single voter elects itself well under a second after start.
	raftTimeout = 50 * time.Millisecond
	// snapshotThreshold is the number of log entries after which raft takes a snapshot.
	snapshotThreshold = 1024
	// trailingLogs is the number of log entries kept after a snapshot.
	trailingLogs = 1024
	// snapshotsRetained is the number of snapshots kept on disk.
	snapshotsRetained = 2
	// defaultOpenTimeout bounds Open's wait for leadership and log replay (one-node mode).
	defaultOpenTimeout = 10 * time.Second
	// defaultElectionTimeout and defaultFetchTimeout are Kafka's defaults of
	// controller.quorum.election.timeout.ms and controller.quorum.fetch.timeout.ms.
	defaultElectionTimeout = time.Second
	defaultFetchTimeout    = 2 * time.Second
	// storeLockTimeout bounds the wait for the lock of the log store file.
	storeLockTimeout = time.Second
)

// ErrNotController is returned by Apply, AddNonvoter and RemoveServer when this node is not
// (or no longer) the active controller, or the controller is closed (Kafka's
// NOT_CONTROLLER). The wrapping error names the active controller when one is known.
var ErrNotController = errors.New("not the active controller")

// ErrInconsistentClusterID is reported (Err, Open) when the metadata log belongs to another
// cluster than Options.ClusterID (Kafka's INCONSISTENT_CLUSTER_ID): the node must not
// serve.
var ErrInconsistentClusterID = errors.New("inconsistent cluster ID")

// ErrClosed is returned by the Wait methods once the controller is closed.
var ErrClosed = errors.New("metadata: controller closed")

// Options configure Open.
type Options struct {
	// Dir is the metadata log directory (created if missing): raft.db holds the raft log
	// and stable state, snapshots/ the snapshots.
	Dir string
	// NodeID is this node's ID (Kafka's node.id); it is the raft server ID.
	NodeID int32
	// ClusterID is the cluster ID of meta.properties. In the one-node mode it is used only
	// when bootstrapping a new metadata log, and empty generates one (22-char base64url of a
	// random UUID, like kafka-storage random-uuid); a non-empty value that differs from the
	// stored cluster ID makes Open fail. With Voters it is required and never generated:
	// the first active controller writes it to a log that has none, and a log with another
	// cluster ID fails Open or, when learnt later, Err (ErrInconsistentClusterID).
	ClusterID string
	// Bootstrap are records written with the ClusterRecord when the cluster's log is
	// created (Kafka's bootstrap metadata of kafka-storage format: the SCRAM credentials
	// of --add-scram); ignored once the log has a cluster ID.
	Bootstrap []Record
	// Logger receives the controller's messages, and raft's at debug level; nil uses
	// slog.Default().
	Logger *slog.Logger
	// OpenTimeout bounds Open's wait for leadership and log replay in the one-node mode; 0
	// means 10 s. With Voters, Open does not wait (see Open).
	OpenTimeout time.Duration

	// Forward, when set, carries a batch that Apply is given on a node that is not the
	// active controller to the active controller (the ApplyRecords RPC) and returns the
	// metadata offset it was applied at, or the error it was refused with (the same
	// sentinels as Apply's); Apply then waits until the local image reaches that offset.
	// Nil: Apply off the active controller fails with ErrNotController.
	Forward func(ctx context.Context, batch []byte) (offset uint64, err error)

	// Voters are the voters of the metadata quorum (controller.quorum.voters), each a node
	// ID and the host:port of its controller listener, where its raft streams are served.
	// Empty selects the one-node mode: an in-memory transport, this node the only voter.
	// IDs and addresses must be unique. A first-starting voter bootstraps the log with
	// exactly these voters; a voter's existing log must list the same voters.
	Voters []Voter
	// ControllerRole says this node is a controller (process.roles contains controller):
	// its NodeID must then be in Voters. A node without it must not be in Voters: it follows
	// the log as an observer (raft non-voter), never bootstraps, and waits for the active
	// controller to add it (AddNonvoter). Ignored without Voters.
	ControllerRole bool
	// RaftListener yields this node's incoming raft streams, each starting with
	// netmux.RaftByte: the sub-listener of netmux.Mux.Claim(netmux.RaftByte) on the
	// controller listener (a voter) or the broker listener (an observer: hashicorp/raft's
	// leader dials its followers). Required with Voters; Close closes it.
	RaftListener net.Listener
	// AdvertisedRaftAddr is the host:port other nodes dial to reach RaftListener. Empty means
	// the Voters entry for a voter (which it must equal when set) and RaftListener's address
	// for an observer (which then must not be a wildcard address).
	AdvertisedRaftAddr string
	// ElectionTimeout is controller.quorum.election.timeout.ms (0: 1 s): how long a
	// candidate waits for votes before it starts another election (hashicorp's
	// ElectionTimeout). hashicorp requires it to be at least the heartbeat timeout, so a
	// value below FetchTimeout (as Kafka's defaults, 1 s < 2 s) is raised to FetchTimeout.
	ElectionTimeout time.Duration
	// FetchTimeout is controller.quorum.fetch.timeout.ms (0: 2 s): a voter that has not
	// heard from the active controller for this long (hashicorp randomises it up to twice
	// that) becomes a candidate (hashicorp's HeartbeatTimeout; the leader heartbeats every
	// tenth of it), and an active controller that has not reached a majority of the voters
	// for this long resigns (hashicorp's LeaderLeaseTimeout, which must not exceed the
	// heartbeat timeout; Kafka resigns after 1.5 times the fetch timeout).
	FetchTimeout time.Duration
}

// Voter is a member of the metadata quorum: its node ID and the host:port of its raft
// streams (for a voter, its controller listener as in controller.quorum.voters). Observers
// are listed with the same shape.
type Voter struct {
	ID   int32
	Addr string
}

// String returns ID@HOST:PORT, the form of controller.quorum.voters.
func (v Voter) String() string { return strconv.Itoa(int(v.ID)) + "@" + v.Addr }

// Controller is the metadata quorum member of this node (Kafka's QuorumController on a
// controller, its metadata log follower on a broker-only node): it owns the raft log and
// the current Image. Safe for concurrent use.
type Controller struct {
	fsm    *fsm
	raft   *raft.Raft
	trans  raft.Transport // *raft.InmemTransport or *raft.NetworkTransport
	store  *raftboltdb.BoltStore
	log    *slog.Logger
	nodeID int32
	// clusterID is Options.ClusterID, the cluster this node belongs to ("" in the one-node
	// mode when it is generated).
	clusterID string
	// bootstrap is Options.Bootstrap, written with the ClusterRecord by the first active
	// controller of a quorum.
	bootstrap []Record
	quorum    *quorum // nil in the one-node mode
	fwd       func(ctx context.Context, batch []byte) (uint64, error)
	// replayIndex is the last index of the local log when raft started (WaitReplayed).
	replayIndex uint64
	// fsmIndex is the raft index of the last command the state machine has processed
	// since Open (trackedFSM).
	fsmIndex atomic.Uint64

	ctx    context.Context // ends at Close: the active controller's own writes
	cancel context.CancelFunc
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	appliedMu sync.Mutex
	appliedCh chan struct{} // closed and replaced after each applied batch

	leaderMu   sync.Mutex
	leaderSubs []chan Leadership
	leaderDone bool

	failOnce sync.Once
	failed   chan struct{}
	failErr  error // set before failed is closed

	closeOnce sync.Once
	closeErr  error
}

// newTransport returns the in-memory raft transport of the one-node mode: a single voter
// has no peer to talk to.
func newTransport(id raft.ServerID) (raft.ServerAddress, *raft.InmemTransport) {
	return raft.NewInmemTransport(raft.ServerAddress("node-" + string(id)))
}

// Open opens the metadata log in opts.Dir and returns the controller.
//
// In the one-node mode (no Voters) it bootstraps a new log with this node as the only
// voter, waits until this node is the leader and every committed record is applied,
// writes the ClusterRecord if the log has none, and returns; it fails after
// opts.OpenTimeout if this node does not become leader (for example when the log was
// bootstrapped with another node ID).
//
// With Voters it checks the quorum settings (errors name the Kafka config key), bootstraps
// a new log of a voter with Voters, starts raft and returns without waiting for a quorum:
// the image then holds the latest local snapshot, and the local log's tail is applied once
// an active controller confirms it is committed. Callers wait with WaitForLeader,
// WaitReplayed or WaitApplied, and refuse to serve when Failed is closed. A log whose
// snapshot already names another cluster ID fails Open with ErrInconsistentClusterID.
func Open(opts Options) (*Controller, error) {
	if opts.Dir == "" {
		return nil, errors.New("metadata: Options.Dir is empty")
	}
	q, err := newQuorum(opts)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	timeout := opts.OpenTimeout
	if timeout <= 0 {
		timeout = defaultOpenTimeout
	}
	deadline := time.Now().Add(timeout)
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	storePath := filepath.Join(opts.Dir, "raft.db")
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        storePath,
		BoltOptions: &bbolt.Options{Timeout: storeLockTimeout},
	})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("metadata: log store %s is locked by another process", storePath)
	}
	if err != nil {
		return nil, fmt.Errorf("metadata: open log store %s: %w", storePath, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Controller{
		fsm: newFSM(log), store: store, log: log, nodeID: opts.NodeID, clusterID: opts.ClusterID, bootstrap: opts.Bootstrap, quorum: q, fwd: opts.Forward,
		ctx: ctx, cancel: cancel, done: make(chan struct{}), appliedCh: make(chan struct{}), failed: make(chan struct{}),
	}
	if err := c.start(opts, deadline); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// quorumCommitTimeout is raft's CommitTimeout with Voters: how long an idle leader
// waits before it sends followers an AppendEntries with its commit index. hashicorp/raft's
// heartbeats do not carry the commit index, so a committed write reaches the other nodes'
// images only with the next AppendEntries: brokers answer Metadata from images that differ
// for up to twice this long after each write (Kafka's KRaft leader answers its followers'
// pending fetches as soon as its high watermark moves). 10 ms keeps that window short for
// about a hundred empty AppendEntries a second per follower.
const quorumCommitTimeout = 10 * time.Millisecond

// raftConfig returns the raft configuration: 50 ms timeouts for the one-node mode, else
// the mapping of Kafka's timeouts documented on Options.
func raftConfig(opts Options, q *quorum, logger hclog.Logger) *raft.Config {
	cfg := raft.DefaultConfig()
	cfg.LocalID = serverID(opts.NodeID)
	cfg.HeartbeatTimeout = raftTimeout
	cfg.ElectionTimeout = raftTimeout
	cfg.LeaderLeaseTimeout = raftTimeout
	cfg.CommitTimeout = raftTimeout
	if q != nil {
		cfg.CommitTimeout = quorumCommitTimeout
		cfg.HeartbeatTimeout = q.fetchTimeout
		cfg.LeaderLeaseTimeout = q.fetchTimeout
		cfg.ElectionTimeout = max(q.electionTimeout, q.fetchTimeout)
	}
	cfg.SnapshotThreshold = snapshotThreshold
	cfg.TrailingLogs = trailingLogs
	cfg.Logger = logger
	return cfg
}

func (c *Controller) start(opts Options, deadline time.Time) error {
	hlog := newRaftLogger(c.log)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(opts.Dir, snapshotsRetained, hlog)
	if err != nil {
		return fmt.Errorf("metadata: snapshot store: %w", err)
	}
	cfg := raftConfig(opts, c.quorum, hlog)
	notify := make(chan bool, 8) // raft blocks on it: watchLeadership drains it
	cfg.NotifyCh = notify

	var addr raft.ServerAddress
	if c.quorum == nil {
		var inmem *raft.InmemTransport
		addr, inmem = newTransport(cfg.LocalID)
		c.trans = inmem
	} else {
		c.trans, _ = newNetworkTransport(opts.RaftListener, c.quorum.advertised, hlog)
	}
	existing, err := raft.HasExistingState(c.store, c.store, snaps)
	if err != nil {
		return fmt.Errorf("metadata: read log state: %w", err)
	}
	if !existing {
		var conf raft.Configuration
		switch {
		case c.quorum == nil:
			conf.Servers = []raft.Server{{Suffrage: raft.Voter, ID: cfg.LocalID, Address: addr}}
		case c.quorum.voter:
			conf = c.quorum.configuration()
		}
		if len(conf.Servers) > 0 {
			if err := raft.BootstrapCluster(cfg, c.store, c.store, snaps, c.trans, conf); err != nil {
				return fmt.Errorf("metadata: bootstrap: %w", err)
			}
			c.log.Info("bootstrapped metadata log", "dir", opts.Dir, "nodeId", opts.NodeID, "voters", configuredVoters(conf))
		}
	}
	r, err := raft.NewRaft(cfg, trackedFSM{c.fsm, c}, c.store, c.store, snaps, c.trans)
	if err != nil {
		return fmt.Errorf("metadata: start raft: %w", err)
	}
	c.raft = r
	c.replayIndex = r.LastIndex()
	c.wg.Add(2)
	go c.watchLeadership(notify)
	go c.watchImage(c.fsm.subscribe())

	if c.quorum != nil {
		return c.startQuorum(opts, existing)
	}
	if err := c.checkVoter(cfg.LocalID, opts); err != nil {
		return err
	}
	if err := c.awaitLeader(deadline, opts); err != nil {
		return err
	}
	if err := r.Barrier(time.Until(deadline)).Error(); err != nil {
		return fmt.Errorf("metadata: replay log in %s: %w", opts.Dir, err)
	}
	im := c.Image()
	switch {
	case im.ClusterID == "":
		id := opts.ClusterID
		if id == "" {
			id = newClusterID()
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if im, err = c.Apply(ctx, append([]Record{ClusterRecord{ClusterID: id}}, opts.Bootstrap...)...); err != nil {
			return fmt.Errorf("metadata: write cluster ID: %w", err)
		}
	case opts.ClusterID != "" && opts.ClusterID != im.ClusterID:
		return fmt.Errorf("metadata: the log in %s belongs to cluster %s, not %s", opts.Dir, im.ClusterID, opts.ClusterID)
	}
	c.log.Info("metadata log ready", "clusterId", im.ClusterID, "offset", im.Offset,
		"topics", len(im.Topics), "mirrors", len(im.Mirrors))
	return nil
}

// checkVoter fails early when the stored raft configuration does not list this node as a
// voter: it could never become leader.
func (c *Controller) checkVoter(id raft.ServerID, opts Options) error {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("metadata: read raft configuration: %w", err)
	}
	var voters []raft.ServerID
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			if s.ID == id {
				return nil
			}
			voters = append(voters, s.ID)
		}
	}
	return fmt.Errorf("metadata: node ID %d is not a voter of the metadata log in %s (voters: %v)", opts.NodeID, opts.Dir, voters)
}

func (c *Controller) awaitLeader(deadline time.Time, opts Options) error {
	if c.raft.State() == raft.Leader {
		return nil
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case leader := <-c.raft.LeaderCh():
			if leader {
				return nil
			}
		case <-timer.C:
			return fmt.Errorf("metadata: node %d did not become the metadata leader of %s within the open timeout (state %v)",
				opts.NodeID, opts.Dir, c.raft.State())
		}
	}
}

// Image returns the current image (never nil). Do not modify it.
func (c *Controller) Image() *Image { return c.fsm.image.Load() }

// Apply proposes recs as one atomic batch (one raft log entry), waits until it is applied
// and returns the resulting image. Records are checked against the current image first and
// again when applied; a batch with an invalid record changes nothing and returns
// ErrTopicExists, ErrUnknownTopic, ErrInvalidPartitions, ErrUnknownMirror, ErrMirrorExists
// or ErrInvalidRecord (wrapped with details). ErrNotController when this node cannot write:
// on a node that is not the active controller it comes at once, before the records are
// checked, unless Options.Forward carries the batch to the active controller (the image
// returned is then this node's once it includes the batch). If ctx ends first, Apply
// returns ctx.Err(), and the batch may still be applied later. Apply with no records
// returns the current image.
func (c *Controller) Apply(ctx context.Context, recs ...Record) (*Image, error) {
	if len(recs) == 0 {
		return c.Image(), nil
	}
	data, err := encodeBatch(recs)
	if err != nil {
		return nil, err
	}
	if !c.IsLeader() {
		return c.forward(ctx, data)
	}
	decoded, err := decodeBatch(data)
	if err != nil {
		return nil, err
	}
	if _, err := applyBatch(c.Image(), 0, decoded); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := c.raft.Apply(data, 0)
	if err := c.await(ctx, f, "raft apply"); err != nil {
		if errors.Is(err, ErrNotController) && c.fwd != nil {
			return c.forward(ctx, data) // leadership lost before the batch was committed
		}
		return nil, err
	}
	switch v := f.Response().(type) {
	case *Image:
		return v, nil
	case error:
		return nil, v
	default:
		return nil, fmt.Errorf("metadata: unexpected apply response %T", v)
	}
}

// forward sends an encoded batch to the active controller through Options.Forward and
// waits until this node's image includes it; ErrNotController without Forward.
func (c *Controller) forward(ctx context.Context, data []byte) (*Image, error) {
	if c.fwd == nil {
		return nil, c.notController()
	}
	offset, err := c.fwd(ctx, data)
	if err != nil {
		return nil, err
	}
	if err := c.WaitApplied(ctx, offset); err != nil {
		return nil, err
	}
	return c.Image(), nil
}

// CatchUp waits until the image includes every batch the active controller had applied
// when CatchUp was called: a write acknowledged through another node is then visible here
// (read-your-writes across nodes). The active controller's image is already current;
// elsewhere CatchUp asks the active controller for its offset through Options.Forward
// (an empty batch, which writes nothing). Errors: ErrNotController (no active controller
// reachable), ctx.Err(), ErrClosed, or Err().
func (c *Controller) CatchUp(ctx context.Context) error {
	if c.IsLeader() {
		return nil
	}
	data, err := encodeBatch(nil)
	if err != nil {
		return err
	}
	_, err = c.forward(ctx, data)
	return err
}

// Subscribe returns a channel that receives a signal after every applied batch (and after a
// snapshot is restored). It never blocks the controller: the buffer holds one signal and
// later ones coalesce into it, so the receiver should call Image() on each signal. The
// channel is closed by Close.
func (c *Controller) Subscribe() <-chan struct{} { return c.fsm.subscribe() }

// Close shuts raft down, closes the transport (and RaftListener), the log store and every
// Subscribe and SubscribeLeadership channel. It does not hand leadership over first, and
// it does not wait for unreachable peers: raft streams in progress are cut. Calling it
// again is harmless.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Controller) close() error {
	var errs []error
	c.cancel()
	nt, network := c.trans.(*raft.NetworkTransport)
	if c.raft != nil {
		f := c.raft.Shutdown()
		if network {
			// Cut streams and dials to peers now: raft's shutdown waits for its replication
			// and vote goroutines, which could otherwise wait out the transport timeout.
			nt.Close()
		}
		if err := f.Error(); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
			errs = append(errs, err)
		}
	}
	if closer, ok := c.trans.(interface{ Close() error }); ok {
		errs = append(errs, closer.Close())
	}
	close(c.done)
	c.fsm.closeSubs()
	c.wg.Wait()
	c.closeLeadershipSubs()
	if c.store != nil {
		errs = append(errs, c.store.Close())
	}
	return errors.Join(errs...)
}

// await waits for a raft future, mapping raft's leadership errors to ErrNotController.
func (c *Controller) await(ctx context.Context, f raft.Future, what string) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-done:
		if err != nil {
			if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
				return fmt.Errorf("%w: %v", ErrNotController, err)
			}
			return fmt.Errorf("metadata: %s: %w", what, err)
		}
		return nil
	}
}
