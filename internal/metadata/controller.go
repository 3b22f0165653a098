// Package metadata holds kmirror's cluster metadata: an ordered log of records (topics,
// configs, cluster mirrors, desired mirror-topic states) applied to an immutable in-memory
// Image, replicated with hashicorp/raft and kept on disk in a raft-boltdb log store plus
// snapshots, the way Apache Kafka's KRaft controller (QuorumController with its
// MetadataImage) works. See architecture section 4.
package metadata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

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
	// defaultOpenTimeout bounds Open's wait for leadership and log replay.
	defaultOpenTimeout = 10 * time.Second
	// storeLockTimeout bounds the wait for the lock of the log store file.
	storeLockTimeout = time.Second
)

// ErrNotController is returned by Apply when this node is not (or no longer) the active
// controller, or the controller is closed (Kafka's NOT_CONTROLLER).
var ErrNotController = errors.New("not the active controller")

// Options configure Open.
type Options struct {
	// Dir is the metadata log directory (created if missing): raft.db holds the raft log
	// and stable state, snapshots/ the snapshots.
	Dir string
	// NodeID is this node's ID (Kafka's node.id); it is the raft server ID.
	NodeID int32
	// ClusterID is used only when bootstrapping a new metadata log; empty generates one
	// (22-char base64url of a random UUID, like kafka-storage random-uuid). A non-empty
	// value that differs from the stored cluster ID makes Open fail.
	ClusterID string
	// Logger receives the controller's messages, and raft's at debug level; nil uses
	// slog.Default().
	Logger *slog.Logger
	// OpenTimeout bounds Open's wait for leadership and log replay; 0 means 10 s.
	OpenTimeout time.Duration
}

// Controller is the metadata quorum member of this node (Kafka's QuorumController): it owns
// the raft log and the current Image. Today it is the only voter; the transport is kept
// behind newTransport so that more voters can join later. Safe for concurrent use.
type Controller struct {
	fsm   *fsm
	raft  *raft.Raft
	trans *raft.InmemTransport
	store *raftboltdb.BoltStore
	log   *slog.Logger

	closeOnce sync.Once
	closeErr  error
}

// newTransport returns the raft transport of this node: in memory, because a single voter
// has no peer to talk to. A multi-node quorum replaces it by a network transport.
func newTransport(id raft.ServerID) (raft.ServerAddress, *raft.InmemTransport) {
	return raft.NewInmemTransport(raft.ServerAddress("node-" + string(id)))
}

// Open opens (or on first start bootstraps, with this node as the only voter) the metadata
// log in opts.Dir, waits until this node is the leader and every committed record is
// applied, writes the ClusterRecord if the log has none, and returns the controller. It
// fails after opts.OpenTimeout if this node does not become leader (for example when the
// log was bootstrapped with another node ID).
func Open(opts Options) (*Controller, error) {
	if opts.Dir == "" {
		return nil, errors.New("metadata: Options.Dir is empty")
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
	c := &Controller{fsm: newFSM(log), store: store, log: log}
	if err := c.start(opts, deadline); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Controller) start(opts Options, deadline time.Time) error {
	hlog := newRaftLogger(c.log)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(opts.Dir, snapshotsRetained, hlog)
	if err != nil {
		return fmt.Errorf("metadata: snapshot store: %w", err)
	}
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(strconv.Itoa(int(opts.NodeID)))
	cfg.HeartbeatTimeout = raftTimeout
	cfg.ElectionTimeout = raftTimeout
	cfg.LeaderLeaseTimeout = raftTimeout
	cfg.CommitTimeout = raftTimeout
	cfg.SnapshotThreshold = snapshotThreshold
	cfg.TrailingLogs = trailingLogs
	cfg.Logger = hlog

	addr, trans := newTransport(cfg.LocalID)
	c.trans = trans
	existing, err := raft.HasExistingState(c.store, c.store, snaps)
	if err != nil {
		return fmt.Errorf("metadata: read log state: %w", err)
	}
	if !existing {
		conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: cfg.LocalID, Address: addr}}}
		if err := raft.BootstrapCluster(cfg, c.store, c.store, snaps, trans, conf); err != nil {
			return fmt.Errorf("metadata: bootstrap: %w", err)
		}
		c.log.Info("bootstrapped metadata log", "dir", opts.Dir, "nodeId", opts.NodeID)
	}
	r, err := raft.NewRaft(cfg, c.fsm, c.store, c.store, snaps, trans)
	if err != nil {
		return fmt.Errorf("metadata: start raft: %w", err)
	}
	c.raft = r

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
		if im, err = c.Apply(ctx, ClusterRecord{ClusterID: id}); err != nil {
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
// or ErrInvalidRecord (wrapped with details). ErrNotController when this node cannot write.
// If ctx ends first, Apply returns ctx.Err(), and the batch may still be applied later.
// Apply with no records returns the current image.
func (c *Controller) Apply(ctx context.Context, recs ...Record) (*Image, error) {
	if len(recs) == 0 {
		return c.Image(), nil
	}
	data, err := encodeBatch(recs)
	if err != nil {
		return nil, err
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
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case err := <-done:
		if err != nil {
			if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
				return nil, fmt.Errorf("%w: %v", ErrNotController, err)
			}
			return nil, fmt.Errorf("metadata: raft apply: %w", err)
		}
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

// Subscribe returns a channel that receives a signal after every applied batch (and after a
// snapshot is restored). It never blocks the controller: the buffer holds one signal and
// later ones coalesce into it, so the receiver should call Image() on each signal. The
// channel is closed by Close.
func (c *Controller) Subscribe() <-chan struct{} { return c.fsm.subscribe() }

// Close shuts raft down, closes the log store and every Subscribe channel. Calling it again
// is harmless.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Controller) close() error {
	var errs []error
	if c.raft != nil {
		if err := c.raft.Shutdown().Error(); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
			errs = append(errs, err)
		}
	}
	if c.trans != nil {
		errs = append(errs, c.trans.Close())
	}
	c.fsm.closeSubs()
	if c.store != nil {
		errs = append(errs, c.store.Close())
	}
	return errors.Join(errs...)
}
