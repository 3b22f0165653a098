package metadata

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// pollInterval is how often the Wait methods look at raft's applied index besides the
// signal of each applied batch: raft applies its own entries (a new leader's no-op,
// configuration changes) without telling the state machine.
const pollInterval = 10 * time.Millisecond

// quorum holds the checked quorum settings of Options.
type quorum struct {
	voters          []Voter // as configured, sorted by ID
	voter           bool    // this node is one of voters
	advertised      string  // this node's raft address
	electionTimeout time.Duration
	fetchTimeout    time.Duration
}

// newQuorum checks the quorum settings of opts; nil without Voters (the one-node mode).
func newQuorum(opts Options) (*quorum, error) {
	if len(opts.Voters) == 0 {
		return nil, nil
	}
	q := &quorum{voters: slices.Clone(opts.Voters), electionTimeout: opts.ElectionTimeout, fetchTimeout: opts.FetchTimeout}
	slices.SortFunc(q.voters, func(a, b Voter) int { return int(a.ID) - int(b.ID) })
	list := votersString(q.voters)
	addrs := map[string]bool{}
	var self *Voter
	for i, v := range q.voters {
		if v.ID < 0 {
			return nil, fmt.Errorf("metadata: controller.quorum.voters %s: negative node ID %d", list, v.ID)
		}
		if i > 0 && q.voters[i-1].ID == v.ID {
			return nil, fmt.Errorf("metadata: controller.quorum.voters %s: node ID %d appears twice", list, v.ID)
		}
		if _, port, err := net.SplitHostPort(v.Addr); err != nil || port == "" {
			return nil, fmt.Errorf("metadata: controller.quorum.voters %s: node %d: address %q is not HOST:PORT", list, v.ID, v.Addr)
		}
		if addrs[v.Addr] {
			return nil, fmt.Errorf("metadata: controller.quorum.voters %s: address %s appears twice", list, v.Addr)
		}
		addrs[v.Addr] = true
		if v.ID == opts.NodeID {
			self = &q.voters[i]
		}
	}
	switch {
	case opts.ControllerRole && self == nil:
		return nil, fmt.Errorf("metadata: node.id %d has the controller role (process.roles) but is not in controller.quorum.voters %s", opts.NodeID, list)
	case !opts.ControllerRole && self != nil:
		return nil, fmt.Errorf("metadata: node.id %d is in controller.quorum.voters %s but process.roles does not contain controller", opts.NodeID, list)
	case opts.ClusterID == "":
		return nil, errors.New("metadata: a node of a metadata quorum (controller.quorum.voters) needs the cluster ID of meta.properties")
	case opts.RaftListener == nil:
		return nil, errors.New("metadata: Options.RaftListener is required with controller.quorum.voters")
	case opts.ElectionTimeout < 0 || opts.FetchTimeout < 0:
		return nil, errors.New("metadata: negative controller.quorum.election.timeout.ms or controller.quorum.fetch.timeout.ms")
	}
	if q.electionTimeout == 0 {
		q.electionTimeout = defaultElectionTimeout
	}
	if q.fetchTimeout == 0 {
		q.fetchTimeout = defaultFetchTimeout
	}
	q.voter = self != nil
	q.advertised = opts.AdvertisedRaftAddr
	switch {
	case q.voter && q.advertised == "":
		q.advertised = self.Addr
	case q.voter && q.advertised != self.Addr:
		return nil, fmt.Errorf("metadata: node %d advertises raft address %s, but controller.quorum.voters %s names %s", opts.NodeID, q.advertised, list, self.Addr)
	case q.advertised == "":
		ta, ok := opts.RaftListener.Addr().(*net.TCPAddr)
		if !ok || ta.IP == nil || ta.IP.IsUnspecified() {
			return nil, fmt.Errorf("metadata: observer %d listens on %v: set Options.AdvertisedRaftAddr to an address the controllers can dial", opts.NodeID, opts.RaftListener.Addr())
		}
		q.advertised = ta.String()
	}
	return q, nil
}

// configuration returns the raft configuration of the configured voters.
func (q *quorum) configuration() raft.Configuration {
	var conf raft.Configuration
	for _, v := range q.voters {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: serverID(v.ID), Address: raft.ServerAddress(v.Addr)})
	}
	return conf
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

// votersString returns voters in the form of controller.quorum.voters.
func votersString(voters []Voter) string {
	parts := make([]string, len(voters))
	for i, v := range voters {
		parts[i] = v.String()
	}
	return strings.Join(parts, ",")
}

// members returns the servers of conf with the given suffrage, sorted by ID; servers whose
// ID is not a node ID (none of ours) are left out.
func members(conf raft.Configuration, suffrage raft.ServerSuffrage) []Voter {
	var out []Voter
	for _, s := range conf.Servers {
		id, err := strconv.ParseInt(string(s.ID), 10, 32)
		if err != nil || s.Suffrage != suffrage {
			continue
		}
		out = append(out, Voter{ID: int32(id), Addr: string(s.Address)})
	}
	slices.SortFunc(out, func(a, b Voter) int { return int(a.ID) - int(b.ID) })
	return out
}

// configuredVoters returns the voters of conf as in controller.quorum.voters.
func configuredVoters(conf raft.Configuration) string { return votersString(members(conf, raft.Voter)) }

// startQuorum finishes Open with Voters: it checks the restored image and the stored
// voters, and returns without waiting for a leader.
func (c *Controller) startQuorum(opts Options, existing bool) error {
	if err := c.checkClusterID(); err != nil {
		return err
	}
	q := c.quorum
	role := "observer"
	if q.voter {
		role = "voter"
	}
	if existing {
		stored := c.Voters()
		if !slices.Equal(stored, q.voters) {
			msg := fmt.Sprintf("the metadata log in %s has the voters %s, but controller.quorum.voters is %s", opts.Dir, votersString(stored), votersString(q.voters))
			if q.voter {
				// A voter must not run with other voters than its peers: with a one-node
				// log of the one-node mode it would elect itself next to the configured quorum.
				return fmt.Errorf("metadata: %s; the voters of a log do not change with the config", msg)
			}
			c.log.Warn(msg + "; following the log's voters")
		}
	} else if !q.voter {
		c.log.Info("new observer of the metadata quorum: waiting for the active controller to add it", "nodeId", opts.NodeID, "raftAddr", q.advertised)
	}
	c.log.Info("metadata quorum member started", "nodeId", opts.NodeID, "role", role, "voters", votersString(q.voters),
		"raftAddr", q.advertised, "lastIndex", c.replayIndex, "clusterId", opts.ClusterID)
	return nil
}

// checkClusterID reports (Failed) and returns ErrInconsistentClusterID when the image of a
// quorum member has a cluster ID other than Options.ClusterID. (The one-node mode checks
// it in Open only: nobody else writes its log.)
func (c *Controller) checkClusterID() error {
	im := c.Image()
	if c.quorum == nil || im.ClusterID == "" || im.ClusterID == c.clusterID {
		return nil
	}
	err := fmt.Errorf("metadata: %w: the metadata log belongs to cluster %s, but this node's meta.properties says %s",
		ErrInconsistentClusterID, im.ClusterID, c.clusterID)
	c.failOnce.Do(func() {
		c.failErr = err
		c.log.Error("this node belongs to another cluster than its metadata quorum", "err", err)
		close(c.failed)
	})
	return err
}

// Failed returns a channel that is closed when this node must stop serving: today when the
// metadata log turns out to belong to another cluster than Options.ClusterID (a node
// pointed at another cluster's quorum). Err then returns the reason.
func (c *Controller) Failed() <-chan struct{} { return c.failed }

// Err returns nil until Failed is closed, then the reason (wrapping
// ErrInconsistentClusterID).
func (c *Controller) Err() error {
	select {
	case <-c.failed:
		return c.failErr
	default:
		return nil
	}
}

// watchImage checks the cluster ID of every new image.
func (c *Controller) watchImage(sub <-chan struct{}) {
	defer c.wg.Done()
	for {
		c.checkClusterID()
		if _, ok := <-sub; !ok {
			return
		}
	}
}

// trackedFSM is the state machine as raft sees it: fsm, recording the raft index of each
// command once fsm has applied (or rejected) it. The Wait methods need that: raft's
// AppliedIndex moves when entries are handed to the state machine's goroutine, before
// they are applied.
type trackedFSM struct {
	*fsm
	c *Controller
}

func (f trackedFSM) Apply(l *raft.Log) any {
	resp := f.fsm.Apply(l)
	f.c.fsmIndex.Store(l.Index)
	f.c.appliedMu.Lock()
	close(f.c.appliedCh) // wakes the Wait methods
	f.c.appliedCh = make(chan struct{})
	f.c.appliedMu.Unlock()
	return resp
}

// appliedThrough reports whether the image reflects every entry of the local log up to
// raft index x: raft has handed them all to the state machine, and the last command among
// them is applied (raft's own entries do not change the image) or covered by a snapshot.
func (c *Controller) appliedThrough(x uint64) bool {
	if c.raft.AppliedIndex() < x {
		return false
	}
	done := c.fsmIndex.Load()
	for i := x; i > done; i-- {
		var l raft.Log
		if err := c.store.GetLog(i, &l); err != nil {
			// Compacted: i and everything before it are in a snapshot, which raft
			// restores before it moves its applied index past it.
			return errors.Is(err, raft.ErrLogNotFound)
		}
		if l.Type == raft.LogCommand {
			// Not applied since Open, unless in a snapshot (restored at Open or installed
			// by the leader, with the log kept before it).
			snap, _ := strconv.ParseUint(c.raft.Stats()["last_snapshot_index"], 10, 64)
			return i <= snap
		}
	}
	return true
}

// waitFor waits until cond holds, ctx ends, the controller closes (ErrClosed) or fails
// (Err). cond is checked after each applied batch and every pollInterval.
func (c *Controller) waitFor(ctx context.Context, cond func() bool) error {
	var tick *time.Ticker
	for {
		c.appliedMu.Lock()
		applied := c.appliedCh
		c.appliedMu.Unlock()
		if err := c.Err(); err != nil {
			return err
		}
		if cond() {
			return nil
		}
		if tick == nil {
			tick = time.NewTicker(pollInterval)
			defer tick.Stop()
		}
		select {
		case <-applied:
		case <-tick.C:
		case <-c.failed:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return ErrClosed
		}
	}
}

// WaitApplied waits until Image reflects the metadata log up to raft index index (for
// example the Offset of the image Apply returned on the active controller). Errors:
// ctx.Err(), ErrClosed, or Err().
func (c *Controller) WaitApplied(ctx context.Context, index uint64) error {
	return c.waitFor(ctx, func() bool { return c.appliedThrough(index) })
}

// WaitReplayed waits until Image reflects every entry of the local log at Open, or those
// of them the active controller kept (it replaces uncommitted ones): the image is then at
// least as recent as when this node stopped. With Voters this needs an active controller,
// because raft applies only entries it knows to be committed. On a new node it returns at
// once; catching up with the quorum is WaitApplied with an index from the active
// controller. Errors as WaitApplied.
func (c *Controller) WaitReplayed(ctx context.Context) error {
	return c.waitFor(ctx, func() bool {
		return c.appliedThrough(min(c.replayIndex, c.raft.LastIndex()))
	})
}

// WaitForLeader waits until an active controller is known and returns its node ID and raft
// address (see Leader). Errors: ctx.Err(), ErrClosed, or Err().
func (c *Controller) WaitForLeader(ctx context.Context) (id int32, raftAddr string, err error) {
	ch := make(chan raft.Observation, 1)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	c.raft.RegisterObserver(obs)
	defer c.raft.DeregisterObserver(obs)
	for {
		if err := c.Err(); err != nil {
			return -1, "", err
		}
		if id, addr, ok := c.Leader(); ok {
			return id, addr, nil
		}
		select {
		case <-ch:
		case <-c.failed:
		case <-ctx.Done():
			return -1, "", ctx.Err()
		case <-c.done:
			return -1, "", ErrClosed
		}
	}
}

// Leadership is a change of this node's leadership of the metadata quorum.
type Leadership struct {
	// Active is true when this node became the active controller, false when it resigned.
	Active bool
	// Epoch is the raft term (the metadata log's leader epoch) when the change was seen.
	Epoch uint64
}

// SubscribeLeadership returns a channel that receives this node's leadership: the current
// one at once, then every change. It never blocks the controller: the buffer holds one
// value and a newer one replaces it, so the last value received is the current leadership
// (a value may repeat; a new Epoch tells a new term). The channel is closed by Close.
func (c *Controller) SubscribeLeadership() <-chan Leadership {
	c.leaderMu.Lock()
	defer c.leaderMu.Unlock()
	ch := make(chan Leadership, 1)
	if c.leaderDone {
		close(ch)
		return ch
	}
	ch <- Leadership{Active: c.IsLeader(), Epoch: c.Term()}
	c.leaderSubs = append(c.leaderSubs, ch)
	return ch
}

func (c *Controller) publishLeadership(l Leadership) {
	c.leaderMu.Lock()
	defer c.leaderMu.Unlock()
	for _, ch := range c.leaderSubs {
		select {
		case <-ch: // replaced by the newer value
		default:
		}
		ch <- l // the only sender, under leaderMu: there is room
	}
}

func (c *Controller) closeLeadershipSubs() {
	c.leaderMu.Lock()
	defer c.leaderMu.Unlock()
	if c.leaderDone {
		return
	}
	c.leaderDone = true
	for _, ch := range c.leaderSubs {
		close(ch)
	}
	c.leaderSubs = nil
}

// watchLeadership fans raft's leadership notifications out to the subscribers and, on a
// quorum, starts the new active controller's own work.
func (c *Controller) watchLeadership(notify <-chan bool) {
	defer c.wg.Done()
	for {
		select {
		case active := <-notify:
			epoch := c.Term()
			c.publishLeadership(Leadership{Active: active, Epoch: epoch})
			if c.quorum == nil {
				continue
			}
			if active {
				c.log.Info("became the active controller", "nodeId", c.nodeID, "epoch", epoch)
				c.wg.Add(1)
				go c.onElected()
			} else {
				c.log.Info("no longer the active controller", "nodeId", c.nodeID, "epoch", epoch)
			}
		case <-c.done:
			return
		}
	}
}

// onElected runs on a new active controller of a quorum: once every record of earlier
// epochs is applied (a barrier), it writes the ClusterRecord if the log has none.
func (c *Controller) onElected() {
	defer c.wg.Done()
	if err := c.raft.Barrier(0).Error(); err != nil {
		c.log.Debug("leadership ended before the metadata log was replayed", "err", err)
		return
	}
	if c.Image().ClusterID != "" {
		return // checked by watchImage
	}
	_, err := c.Apply(c.ctx, append([]Record{ClusterRecord{ClusterID: c.clusterID}}, c.bootstrap...)...)
	switch {
	case err == nil:
		c.log.Info("wrote the cluster ID to the metadata log", "clusterId", c.clusterID)
	case errors.Is(err, ErrNotController) || errors.Is(err, context.Canceled):
		// The next active controller writes it.
	case errors.Is(err, ErrInvalidRecord) && c.Image().ClusterID != "":
		// Written meanwhile by an earlier term of this node.
	default:
		c.log.Error("writing the cluster ID to the metadata log failed", "clusterId", c.clusterID, "err", err)
	}
}

// IsLeader reports whether this node is the active controller now.
func (c *Controller) IsLeader() bool { return c.raft.State() == raft.Leader }

// Leader returns the active controller's node ID and raft address as this node knows it;
// ok is false when none is known (an election, or no quorum). In the one-node mode the
// address is an in-memory placeholder.
func (c *Controller) Leader() (id int32, raftAddr string, ok bool) {
	addr, sid := c.raft.LeaderWithID()
	n, err := strconv.ParseInt(string(sid), 10, 32)
	if sid == "" || err != nil {
		return -1, "", false
	}
	return int32(n), string(addr), true
}

// notController returns ErrNotController, naming the active controller when known.
func (c *Controller) notController() error {
	select {
	case <-c.done:
		return fmt.Errorf("%w: closed", ErrNotController)
	default:
	}
	if id, _, ok := c.Leader(); ok && id != c.nodeID {
		return fmt.Errorf("%w: the active controller is node %d", ErrNotController, id)
	}
	return fmt.Errorf("%w: no active controller is known", ErrNotController)
}

// Term returns the current raft term: the leader epoch of the metadata log.
func (c *Controller) Term() uint64 { return c.raft.CurrentTerm() }

// LastIndex returns the raft index of the last entry of the local log (written, maybe not
// yet committed or applied).
func (c *Controller) LastIndex() uint64 { return c.raft.LastIndex() }

// AppliedIndex returns the raft index of the last entry known committed and handed to the
// state machine here; Image may lag it briefly (WaitApplied waits for it), and
// Image().Offset is at most this (raft's own entries do not change the image).
func (c *Controller) AppliedIndex() uint64 { return c.raft.AppliedIndex() }

// Voters returns the voters of the latest raft configuration known here, sorted by ID.
func (c *Controller) Voters() []Voter {
	return members(c.raft.GetConfiguration().Configuration(), raft.Voter)
}

// Observers returns the observers (raft non-voters) of the latest raft configuration known
// here, sorted by ID; Addr is the raft address the active controller dials.
func (c *Controller) Observers() []Voter {
	return members(c.raft.GetConfiguration().Configuration(), raft.Nonvoter)
}

// AddNonvoter adds node id, reachable for raft at addr (host:port), as an observer: it gets
// the log but never votes or leads. Adding an observer again updates its address. It
// returns once the configuration change is committed. Errors: ErrNotController off the
// active controller, an error when id is a voter, ctx.Err().
func (c *Controller) AddNonvoter(ctx context.Context, id int32, addr string) error {
	if !c.IsLeader() {
		return c.notController()
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("metadata: observer %d: address %q is not HOST:PORT", id, addr)
	}
	for _, v := range c.Voters() {
		if v.ID == id {
			return fmt.Errorf("metadata: node %d is a voter of the metadata quorum, not an observer", id)
		}
	}
	return c.await(ctx, c.raft.AddNonvoter(serverID(id), raft.ServerAddress(addr), 0, 0), "add observer")
}

// RemoveServer removes node id (an observer, or a voter) from the raft configuration and
// returns once the change is committed; removing an unknown node changes nothing. Errors:
// ErrNotController off the active controller, ctx.Err().
func (c *Controller) RemoveServer(ctx context.Context, id int32) error {
	if !c.IsLeader() {
		return c.notController()
	}
	return c.await(ctx, c.raft.RemoveServer(serverID(id), 0, 0), "remove server")
}
