// Package controller is kmirror's active controller (Apache Kafka's QuorumController with
// its ClusterControlManager, BrokerHeartbeatManager, ReplicationControlManager and
// ProducerIdControlManager): on the node that leads the metadata quorum it registers
// brokers and gives them broker epochs, fences brokers whose session expired and unfences
// those caught up with the metadata log, runs controlled shutdowns, elects partition
// leaders, places the replicas of new partitions and hands out producer-ID blocks. Every
// decision is a batch of metadata records (internal/metadata) applied through the quorum;
// the state it keeps in memory (heartbeat times, metadata offsets) is rebuilt when another
// node becomes the active controller. See ../shared/design/cluster.md §1–2.
package controller

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/wire"
)

// Quorum is the metadata log as the active controller uses it (*metadata.Controller).
type Quorum interface {
	// Image is the latest applied image.
	Image() *metadata.Image
	// Apply proposes a batch and returns the image after it (metadata.Controller.Apply).
	Apply(ctx context.Context, recs ...metadata.Record) (*metadata.Image, error)
	// IsLeader reports whether this node leads the quorum.
	IsLeader() bool
	// Barrier waits until every record committed before it is applied to the image (only
	// on the leader).
	Barrier(ctx context.Context) error
}

// Options configure a Controller.
type Options struct {
	// NodeID is this node's node.id.
	NodeID int32
	// SessionTimeout is broker.session.timeout.ms: a broker without a heartbeat for this
	// long is fenced.
	SessionTimeout time.Duration
	// HeartbeatInterval is broker.heartbeat.interval.ms. A broker whose heartbeats came
	// over a connection that closed (its process died: the kernel closes its sockets) and
	// that has not heartbeated again within twice this (at most SessionTimeout) is fenced
	// then, without waiting out the session (see docs/cluster.md). Zero: only the session
	// timeout fences.
	HeartbeatInterval time.Duration
	// UncleanLeaderElection is this node's static unclean.leader.election.enable, the
	// default of topics that set none when no dynamic broker config does either.
	UncleanLeaderElection bool
	// AutoLeaderRebalance is auto.leader.rebalance.enable: every
	// LeaderImbalanceCheckInterval the active controller moves leadership back to the
	// preferred replicas that are in the ISR and may lead.
	AutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds (300 s when
	// not positive).
	LeaderImbalanceCheckInterval time.Duration
	// Combined is set when this node is also a broker (process.roles=broker,controller):
	// becoming active then gives its own earlier registration no session, so that the
	// restarted broker registers again at once.
	Combined bool
	// Incarnation is, with Combined, the incarnation ID of this process's broker: a
	// registration with it is this process's own, live broker, which gets a fresh session
	// like the others when this node becomes active (only an earlier process's gets none).
	Incarnation metadata.TopicID
	// AdoptUnassigned gives partitions without replicas (topics written by a release before
	// clusters) to broker NodeID once it is registered: the one-node cluster upgrading its
	// data directory in place.
	AdoptUnassigned bool
	// AdoptEpoch is the leader epoch an adopted partition keeps (its log's); nil: 0.
	AdoptEpoch func(topic string, partition int32) int32
	// InterBrokerListener is inter.broker.listener.name: a broker-only node's endpoint on it
	// is where the quorum's raft reaches it, as an observer (AddNonvoter).
	InterBrokerListener string
	// Logger receives the controller's decisions; nil discards them.
	Logger *slog.Logger
}

// Observers is the part of the quorum that admits broker-only nodes as observers
// (*metadata.Controller); a Quorum without it has no observers.
type Observers interface {
	Voters() []metadata.Voter
	Observers() []metadata.Voter
	AddNonvoter(ctx context.Context, id int32, addr string) error
}

// Controller is the active-controller logic of one node. Its request handlers answer
// NOT_CONTROLLER while this node does not lead the quorum. Safe for concurrent use.
type Controller struct {
	opts Options
	q    Quorum
	log  *slog.Logger

	// writeMu serialises the controller's read-image-then-write decisions, as Kafka's
	// single controller thread does.
	writeMu sync.Mutex

	mu       sync.Mutex
	active   bool
	sessions map[int32]*session
	rnd      *rand.Rand

	// rebalanceAt is when the next preferred-leader rebalance runs; zero while none is
	// scheduled (no imbalance seen since the last one). writeMu held.
	rebalanceAt time.Time
}

// session is what the active controller knows of a broker's liveness (Kafka's
// BrokerHeartbeatState): the last heartbeat and the metadata offset it reported.
type session struct {
	lastContact    time.Time
	metadataOffset int64
	// shutdownOffset is the metadata offset of the batch that started the broker's
	// controlled shutdown, −1 when none (Kafka's controlledShutdownOffset): the broker may
	// stop once every active broker has applied it.
	shutdownOffset int64
	// conn is the Done channel of the client connection that carried the broker's
	// heartbeats (nil when they come in-process), watched by watchConnection; connLost is
	// when that connection closed, zero while it is open; gap is the time between the
	// last two heartbeats.
	conn     <-chan struct{}
	connLost time.Time
	gap      time.Duration
}

// newSession is the session of a broker heard from now at metadata offset offset.
func newSession(offset int64) *session {
	return &session{lastContact: time.Now(), metadataOffset: offset, shutdownOffset: -1}
}

// New returns the controller of this node over q; call Run.
func New(q Quorum, opts Options) *Controller {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 9 * time.Second
	}
	if opts.LeaderImbalanceCheckInterval <= 0 {
		opts.LeaderImbalanceCheckInterval = 300 * time.Second
	}
	l := opts.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &Controller{
		opts: opts, q: q, log: l.With("component", "controller"),
		sessions: map[int32]*session{},
		rnd:      rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
}

// tick is how often Run checks leadership, expired sessions and offline partitions.
const tick = 100 * time.Millisecond

// Run acts as the active controller whenever this node leads the quorum, until ctx ends:
// on becoming active (once every earlier record is applied and the image holds the
// cluster ID) it gives every registered broker a fresh session (as Kafka's new
// controllers do), then fences brokers whose session expires and elects leaders for
// partitions that have none.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		c.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Active reports whether this node is the active controller.
func (c *Controller) Active() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active && c.q.IsLeader()
}

func (c *Controller) step(ctx context.Context) {
	if !c.q.IsLeader() {
		c.mu.Lock()
		if c.active {
			c.log.Info("no longer the active controller")
		}
		c.active = false
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	wasActive := c.active
	c.mu.Unlock()
	if !wasActive {
		bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.q.Barrier(bctx)
		cancel()
		if err != nil {
			return // retried on the next tick
		}
		if c.q.Image().ClusterID == "" {
			// The quorum's first active controller writes the cluster ID right after its
			// election (metadata.Controller); registrations are checked against it.
			return
		}
		c.mu.Lock()
		c.active = true
		c.sessions = map[int32]*session{}
		im := c.q.Image()
		for _, id := range im.BrokerIDs() {
			// This node's own broker registered by an earlier process (stopped when this
			// one started) gets no session; registered by this process, it is alive.
			if id == c.opts.NodeID && c.opts.Combined && im.Brokers[id].IncarnationID != c.opts.Incarnation {
				continue
			}
			c.sessions[id] = newSession(-1)
		}
		sessions := len(c.sessions) // read under mu: registrations write the map
		c.mu.Unlock()
		c.writeMu.Lock()
		c.rebalanceAt = time.Time{}
		c.writeMu.Unlock()
		c.log.Info("this node is the active controller", "node.id", c.opts.NodeID, "brokers", sessions)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.fenceExpired(ctx)
	c.adoptUnassigned(ctx)
	if recs := electOffline(c.q.Image(), c.unclean(c.q.Image())); len(recs) > 0 {
		c.apply(ctx, "electing leaders of offline partitions", recs)
	}
	c.maybeRebalance(ctx, time.Now())
}

// unclean returns the unclean-election rule over im.
func (c *Controller) unclean(im *metadata.Image) uncleanRule {
	return func(t *metadata.Topic) bool { return c.uncleanEnabled(im, t) }
}

// maybeRebalance runs auto.leader.rebalance.enable as Kafka's QuorumController
// maybeScheduleNextBalancePartitionLeaders does: once a partition is seen not led by its
// preferred replica, a rebalance is scheduled leader.imbalance.check.interval.seconds
// later; it elects the preferred replicas that are in the ISR and may lead, at most
// maxElectionsPerImbalance in one batch (a full batch schedules the next at once).
// leader.imbalance.per.broker.percentage is not consulted, as Kafka's KRaft controller
// does not. writeMu held.
func (c *Controller) maybeRebalance(ctx context.Context, now time.Time) {
	if !c.opts.AutoLeaderRebalance {
		return
	}
	im := c.q.Image()
	if c.rebalanceAt.IsZero() {
		if imbalanced(im) {
			c.rebalanceAt = now.Add(c.opts.LeaderImbalanceCheckInterval)
		}
		return
	}
	if now.Before(c.rebalanceAt) {
		return
	}
	c.rebalanceAt = time.Time{}
	recs := balanceLeaders(im, maxElectionsPerImbalance)
	if len(recs) == 0 {
		return
	}
	if _, err := c.apply(ctx, "electing preferred leaders (auto.leader.rebalance.enable)", recs); err == nil {
		c.log.Info("moved leaderships back to preferred replicas", "partitions", len(recs))
	}
	if len(recs) >= maxElectionsPerImbalance {
		c.rebalanceAt = now.Add(10 * time.Millisecond)
	}
}

// apply writes recs, logging a failure (the decision is retried on the next tick). writeMu
// held.
func (c *Controller) apply(ctx context.Context, what string, recs []metadata.Record) (*metadata.Image, error) {
	im, err := c.q.Apply(ctx, recs...)
	if err != nil {
		c.log.Warn("controller write failed", "what", what, "records", len(recs), "err", err)
		return nil, err
	}
	c.log.Debug("controller write", "what", what, "records", len(recs), "offset", im.Offset)
	return im, nil
}

// fenceExpired fences every unfenced broker whose session expired. writeMu held.
func (c *Controller) fenceExpired(ctx context.Context) {
	im := c.q.Image()
	now := time.Now()
	for _, id := range im.BrokerIDs() {
		b := im.Brokers[id]
		if b.Fenced {
			continue
		}
		c.mu.Lock()
		s := c.sessions[id]
		expired := s == nil || now.Sub(s.lastContact) > c.opts.SessionTimeout
		lost := !expired && c.connectionLost(s, now)
		c.mu.Unlock()
		switch {
		case expired:
			c.log.Warn("fencing broker: no heartbeat within broker.session.timeout.ms", "broker", id, "session.timeout", c.opts.SessionTimeout)
		case lost:
			c.log.Warn("fencing broker: its controller connection closed and no heartbeat followed within twice broker.heartbeat.interval.ms",
				"broker", id, "heartbeat.interval", c.opts.HeartbeatInterval)
		default:
			continue
		}
		if _, err := c.apply(ctx, "fencing an expired broker", c.fence(im, b)); err == nil {
			im = c.q.Image()
		}
	}
}

// connectionLost reports whether the connection of s's heartbeats closed more than the
// grace before now, with no heartbeat since: twice the broker's heartbeat interval (this
// node's HeartbeatInterval, or the gap between its last two heartbeats when longer: a
// broker may heartbeat less often than this node is configured to), at most
// SessionTimeout. mu held.
func (c *Controller) connectionLost(s *session, now time.Time) bool {
	if c.opts.HeartbeatInterval <= 0 || s.connLost.IsZero() {
		return false
	}
	return now.Sub(s.connLost) > min(2*max(c.opts.HeartbeatInterval, s.gap), c.opts.SessionTimeout)
}

// watchConnection makes s, the session of broker id just renewed by a heartbeat that
// arrived with ctx (its connection's context, which ends when the connection closes),
// follow that connection: a new connection is watched once, and its end stamps connLost
// on the session then current, if it still follows that connection. old is the
// session s replaces. mu held.
func (c *Controller) watchConnection(ctx context.Context, id int32, s, old *session) {
	if old != nil {
		s.conn = old.conn
		s.gap = s.lastContact.Sub(old.lastContact)
	}
	if !wire.FromConnection(ctx) {
		return // in-process (this node's own broker): the session timeout alone applies
	}
	done := ctx.Done()
	if done == s.conn {
		// A heartbeat served after its connection closed (queued behind others, or
		// waiting for writeMu) renews the session, but not the connection.
		if ctx.Err() != nil && !errors.Is(context.Cause(ctx), wire.ErrServerClosed) {
			s.connLost = time.Now()
		}
		return
	}
	s.conn = done
	context.AfterFunc(ctx, func() {
		if errors.Is(context.Cause(ctx), wire.ErrServerClosed) {
			return // this node's listener stops: the brokers did not go away
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if cur := c.sessions[id]; cur != nil && cur.conn == done {
			cur.connLost = time.Now()
		}
	})
}

// fence returns the records that fence broker b and move its leaderships and ISR
// memberships away.
func (c *Controller) fence(im *metadata.Image, b *metadata.BrokerRegistration) []metadata.Record {
	fenced := true
	recs := []metadata.Record{metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, Fenced: &fenced}}
	next := *b
	next.Fenced = true
	v := withBroker(im, &next)
	return append(recs, leaving(v, b.ID, c.unclean(v))...)
}

// adoptUnassigned gives the unassigned partitions to this node (AdoptUnassigned) once it
// is registered. writeMu held.
func (c *Controller) adoptUnassigned(ctx context.Context) {
	if !c.opts.AdoptUnassigned {
		return
	}
	im := c.q.Image()
	self, ok := im.Brokers[c.opts.NodeID]
	if !ok {
		return
	}
	leader := metadata.NoLeader
	if self.Usable() {
		leader = self.ID
	}
	var recs []metadata.Record
	eachTopicPartition(im, func(t *metadata.Topic, p int32, reg *metadata.PartitionRegistration) {
		if !reg.Assigned() {
			var epoch int32
			if c.opts.AdoptEpoch != nil {
				epoch = c.opts.AdoptEpoch(t.Name, p)
			}
			recs = append(recs, metadata.PartitionRecord{TopicID: t.ID, Partition: p, Replicas: []int32{self.ID}, ISR: []int32{self.ID}, Leader: leader, LeaderEpoch: epoch})
		}
	})
	if len(recs) > 0 {
		c.log.Info("assigning the partitions of a data directory written before clusters to this node", "partitions", len(recs))
		c.apply(ctx, "adopting unassigned partitions", recs)
	}
}

// eachTopicPartition calls fn for every partition of im, assigned or not.
func eachTopicPartition(im *metadata.Image, fn func(t *metadata.Topic, p int32, reg *metadata.PartitionRegistration)) {
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		for p, reg := range t.Registrations {
			fn(t, int32(p), reg)
		}
	}
}

// withBroker returns a shallow copy of im in which broker b's registration is b: the
// image the next records will produce, for computing elections in the same batch.
func withBroker(im *metadata.Image, b *metadata.BrokerRegistration) *metadata.Image {
	v := *im
	v.Brokers = make(map[int32]*metadata.BrokerRegistration, len(im.Brokers)+1)
	for id, r := range im.Brokers {
		v.Brokers[id] = r
	}
	v.Brokers[b.ID] = b
	return &v
}

// errorCode maps an Apply error to the Kafka error code answered to a broker.
func errorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, metadata.ErrNotController):
		return kerr.NotController.Code
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	default:
		return kerr.UnknownServerError.Code
	}
}

// notActive is the error of a request that reached a node that is not the active
// controller.
func (c *Controller) notActive() bool { return !c.Active() }

// Handle answers a controller RPC (BrokerRegistration, BrokerHeartbeat,
// AllocateProducerIds, AlterPartition, ElectLeaders, ApplyRecords, BumpLeaderEpochs), or
// returns nil for another request. Each answers NOT_CONTROLLER when this node is not the
// active controller.
func (c *Controller) Handle(ctx context.Context, req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		return c.RegisterBroker(ctx, r)
	case *kmsg.BrokerHeartbeatRequest:
		return c.Heartbeat(ctx, r)
	case *kmsg.AllocateProducerIDsRequest:
		return c.AllocateProducerIDs(ctx, r)
	case *kmsg.AlterPartitionRequest:
		return c.AlterPartition(ctx, r)
	case *kmsg.ElectLeadersRequest:
		return c.ElectLeaders(ctx, r)
	case *ApplyRecordsRequest:
		return c.ApplyRecords(ctx, r)
	case *mirrorproto.BumpLeaderEpochsRequest:
		return c.BumpLeaderEpochs(ctx, r)
	}
	return nil
}
