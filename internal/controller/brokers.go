package controller

// BrokerRegistration v0–4, BrokerHeartbeat v0–2 and AllocateProducerIds v0 on the active
// controller (Kafka's ClusterControlManager.registerBroker,
// BrokerHeartbeatManager/ReplicationControlManager.processBrokerHeartbeat and
// ProducerIdControlManager.generateNextProducerId).

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// ProducerIDBlockSize is the number of producer IDs in one block (Kafka's
// ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
const ProducerIDBlockSize = 1000

// securityProtocols are Kafka's SecurityProtocol IDs by name.
var securityProtocols = map[int16]string{0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}

// RegisterBroker registers a broker and answers its broker epoch. The registration is
// fenced until the broker's heartbeats show it caught up with the metadata log. Errors:
// NOT_CONTROLLER; INCONSISTENT_CLUSTER_ID (another cluster ID); INVALID_REGISTRATION (a
// negative broker ID, no listener, an unknown security protocol);
// DUPLICATE_BROKER_REGISTRATION (another incarnation of the broker ID holds a live
// session — two nodes with one node.id — unless the request's PreviousBrokerEpoch shows
// it is that registration's successor after a clean shutdown). A broker registering again
// (a restart) first loses its leaderships, as a fenced broker does.
func (c *Controller) RegisterBroker(ctx context.Context, req *kmsg.BrokerRegistrationRequest) *kmsg.BrokerRegistrationResponse {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	failCode := func(code int16) *kmsg.BrokerRegistrationResponse {
		resp.ErrorCode = code
		resp.BrokerEpoch = -1
		return resp
	}
	fail := func(e *kerr.Error) *kmsg.BrokerRegistrationResponse { return failCode(e.Code) }
	if c.notActive() {
		return fail(kerr.NotController)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	im := c.q.Image()
	if req.ClusterID != im.ClusterID {
		c.log.Warn("refused a broker registration with another cluster ID", "broker", req.BrokerID, "clusterId", req.ClusterID, "want", im.ClusterID)
		return fail(kerr.InconsistentClusterID)
	}
	if req.BrokerID < 0 || len(req.Listeners) == 0 {
		return fail(kerr.InvalidRegistration)
	}
	reg := metadata.RegisterBrokerRecord{BrokerID: req.BrokerID, IncarnationID: req.IncarnationID, Fenced: true}
	if req.Rack != nil {
		reg.Rack = *req.Rack
	}
	for _, l := range req.Listeners {
		proto, ok := securityProtocols[l.SecurityProtocol]
		if !ok || l.Name == "" || l.Port == 0 {
			return fail(kerr.InvalidRegistration)
		}
		reg.Endpoints = append(reg.Endpoints, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port), SecurityProtocol: proto})
	}
	var recs []metadata.Record
	if old, ok := im.Brokers[req.BrokerID]; ok {
		if old.IncarnationID != req.IncarnationID && req.PreviousBrokerEpoch != old.Epoch && c.liveSession(req.BrokerID) {
			c.log.Warn("refused a broker registration: another broker is registered with that broker id",
				"broker", req.BrokerID, "incarnation", metadata.TopicIDString(req.IncarnationID), "registered", metadata.TopicIDString(old.IncarnationID))
			return fail(kerr.DuplicateBrokerRegistration)
		}
		if !old.Fenced {
			// The restarted broker leads nothing until it has caught up again.
			next := *old
			next.Fenced = true
			v := withBroker(im, &next)
			recs = append(recs, leaving(v, old.ID, c.unclean(v))...)
		}
	}
	recs = append(recs, reg)
	out, err := c.apply(ctx, "registering a broker", recs)
	if err != nil {
		return failCode(errorCode(err))
	}
	b := out.Brokers[req.BrokerID]
	c.mu.Lock()
	c.sessions[req.BrokerID] = newSession(-1)
	c.mu.Unlock()
	c.admitObserver(ctx, b)
	c.log.Info("registered broker", "broker", b.ID, "brokerEpoch", b.Epoch, "endpoints", fmt.Sprint(b.Endpoints), "rack", b.Rack)
	resp.BrokerEpoch = b.Epoch
	return resp
}

// admitObserver makes a broker that is not a voter an observer of the metadata quorum
// (a raft non-voter reached on its inter-broker endpoint), so that the log reaches it.
// A failure is logged; the broker's heartbeats retry it while it is not caught up.
func (c *Controller) admitObserver(ctx context.Context, b *metadata.BrokerRegistration) {
	q, ok := c.q.(Observers)
	if !ok {
		return
	}
	e, ok := b.Endpoint(c.opts.InterBrokerListener)
	if !ok {
		c.log.Warn("cannot add a broker to the metadata quorum as an observer: it registered no endpoint on the inter-broker listener",
			"broker", b.ID, "inter.broker.listener.name", c.opts.InterBrokerListener, "endpoints", fmt.Sprint(b.Endpoints))
		return
	}
	addr := net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
	for _, v := range q.Voters() {
		if v.ID == b.ID {
			return
		}
	}
	for _, o := range q.Observers() {
		if o.ID == b.ID && o.Addr == addr {
			return
		}
	}
	if err := q.AddNonvoter(ctx, b.ID, addr); err != nil {
		c.log.Warn("adding a broker to the metadata quorum as an observer", "broker", b.ID, "addr", addr, "err", err)
		return
	}
	c.log.Info("added a broker to the metadata quorum as an observer", "broker", b.ID, "addr", addr)
}

// liveSession reports whether broker id heartbeated within the session timeout.
func (c *Controller) liveSession(id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	return s != nil && time.Since(s.lastContact) <= c.opts.SessionTimeout
}

// Heartbeat renews a broker's session and moves it between Kafka's broker states
// (BrokerHeartbeatManager.calculateNextBrokerState): a fenced broker whose
// CurrentMetadataOffset reached its registration's offset is unfenced (and elected where
// partitions lack a leader); a fenced broker asking WantShutdown may stop at once; an
// unfenced one asking WantShutdown that leads partitions enters controlled shutdown (its
// leaderships move to other ISR members and it leaves the ISRs, Kafka's
// handleBrokerInControlledShutdown), one that leads none is fenced and may stop; a broker
// in controlled shutdown may stop (and is fenced) once it leads nothing and every active
// broker has applied the batch that started its shutdown, so that the new leaders know
// they lead before it stops; WantFence fences it. ShouldShutdown answers "stop now".
// Errors: NOT_CONTROLLER, BROKER_ID_NOT_REGISTERED, STALE_BROKER_EPOCH (the broker must
// register again).
func (c *Controller) Heartbeat(ctx context.Context, req *kmsg.BrokerHeartbeatRequest) *kmsg.BrokerHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	if c.notActive() {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	im := c.q.Image()
	b, ok := im.Brokers[req.BrokerID]
	switch {
	case !ok:
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
		return resp
	case b.Epoch != req.BrokerEpoch:
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp
	}
	c.mu.Lock()
	s := newSession(req.CurrentMetadataOffset)
	old := c.sessions[b.ID]
	if old != nil {
		s.shutdownOffset = old.shutdownOffset
	}
	c.watchConnection(ctx, b.ID, s, old)
	c.sessions[b.ID] = s
	c.mu.Unlock()
	caughtUp := req.CurrentMetadataOffset >= b.Epoch
	if !caughtUp {
		c.admitObserver(ctx, b)
	}
	var recs []metadata.Record
	var what string
	shutdownNow, startShutdown := false, false
	switch {
	case b.Fenced:
		switch {
		case req.WantShutdown:
			shutdownNow = true
		case !req.WantFence && caughtUp:
			what = "unfencing a broker that caught up"
			no := false
			next := *b
			next.Fenced = false
			recs = append(recs, metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, Fenced: &no})
			v := withBroker(im, &next)
			recs = append(recs, electOffline(v, c.unclean(v))...)
		}
	case b.InControlledShutdown:
		if s.shutdownOffset < 0 {
			// Shutting down since before this controller became active: wait for the
			// active brokers to reach this image.
			s.shutdownOffset = int64(im.Offset)
		}
		if !leadsAny(im, b.ID) && s.shutdownOffset <= c.lowestActiveOffset(im) {
			what, shutdownNow = "fencing a broker at the end of its controlled shutdown", true
			recs = c.fence(im, b)
		}
	case req.WantFence:
		what, shutdownNow = "fencing a broker on its request", req.WantShutdown
		recs = c.fence(im, b)
	case req.WantShutdown && !leadsAny(im, b.ID):
		what, shutdownNow = "fencing a broker that shuts down leading no partition", true
		recs = c.fence(im, b)
	case req.WantShutdown:
		what, startShutdown = "starting a controlled shutdown", true
		yes := true
		next := *b
		next.InControlledShutdown = true
		recs = append(recs, metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, InControlledShutdown: &yes})
		v := withBroker(im, &next)
		recs = append(recs, leaving(v, b.ID, c.unclean(v))...)
	}
	if len(recs) > 0 {
		out, err := c.apply(ctx, what, recs)
		if err != nil {
			resp.ErrorCode = errorCode(err)
			return resp
		}
		im = out
		b = im.Brokers[req.BrokerID]
		if startShutdown {
			c.mu.Lock()
			s.shutdownOffset = int64(out.Offset)
			c.mu.Unlock()
		}
		c.log.Info(what, "broker", b.ID, "brokerEpoch", b.Epoch, "metadataOffset", req.CurrentMetadataOffset)
	}
	resp.IsCaughtUp = caughtUp
	resp.IsFenced = b.Fenced
	resp.ShouldShutdown = shutdownNow
	return resp
}

// lowestActiveOffset is the lowest metadata offset that the active brokers (unfenced, not
// in controlled shutdown) last reported, −1 for one not heard from since this controller
// became active; the largest int64 when there is none (Kafka's
// BrokerHeartbeatManager.lowestActiveOffset).
func (c *Controller) lowestActiveOffset(im *metadata.Image) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	lowest := int64(math.MaxInt64)
	for id, b := range im.Brokers {
		if !b.Usable() {
			continue
		}
		off := int64(-1)
		if s := c.sessions[id]; s != nil {
			off = s.metadataOffset
		}
		lowest = min(lowest, off)
	}
	return lowest
}

// leadsAny reports whether broker id leads a partition in im.
func leadsAny(im *metadata.Image, id int32) bool {
	for _, t := range im.Topics {
		if slices.ContainsFunc(t.Registrations, func(r *metadata.PartitionRegistration) bool { return r.Leader == id }) {
			return true
		}
	}
	return false
}

// AllocateProducerIDs hands a registered broker the next block of ProducerIDBlockSize
// producer IDs, never handed out before in this cluster. Errors: NOT_CONTROLLER,
// BROKER_ID_NOT_REGISTERED, STALE_BROKER_EPOCH.
func (c *Controller) AllocateProducerIDs(ctx context.Context, req *kmsg.AllocateProducerIDsRequest) *kmsg.AllocateProducerIDsResponse {
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	resp.ProducerIDStart, resp.ProducerIDLen = -1, 0
	if c.notActive() {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	im := c.q.Image()
	b, ok := im.Brokers[req.BrokerID]
	switch {
	case !ok:
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
		return resp
	case b.Epoch != req.BrokerEpoch:
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp
	}
	start := im.NextProducerID
	if _, err := c.apply(ctx, "allocating a producer ID block", []metadata.Record{
		metadata.ProducerIDsRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, NextProducerID: start + ProducerIDBlockSize},
	}); err != nil {
		resp.ErrorCode = errorCode(err)
		return resp
	}
	resp.ProducerIDStart, resp.ProducerIDLen = start, ProducerIDBlockSize
	return resp
}

// BumpLeaderEpochs raises the leader epoch of each named partition to at least
// MinLeaderEpoch (spec section 6: a mirror partition's EPOCH_FENCING and failover raise
// it through the controller, so that every replica sees one leader epoch): a
// PartitionChangeRecord with the leader epoch max(current + 1, MinLeaderEpoch), nothing
// when the current one is already high enough. It answers the epoch now in force per
// partition. Errors: NOT_CONTROLLER; per partition UNKNOWN_TOPIC_ID,
// UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE (no leader to stamp it).
func (c *Controller) BumpLeaderEpochs(ctx context.Context, req *mirrorproto.BumpLeaderEpochsRequest) *mirrorproto.BumpLeaderEpochsResponse {
	resp := req.ResponseKind().(*mirrorproto.BumpLeaderEpochsResponse)
	if c.notActive() {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	im := c.q.Image()
	var recs []metadata.Record
	for _, rt := range req.Topics {
		tr := mirrorproto.BumpLeaderEpochsResponseTopic{TopicID: rt.TopicID}
		t := im.TopicsByID[rt.TopicID]
		for _, rp := range rt.Partitions {
			pr := mirrorproto.BumpLeaderEpochsResponsePartition{PartitionIndex: rp.PartitionIndex, LeaderEpoch: -1}
			var reg *metadata.PartitionRegistration
			if t != nil {
				reg = t.Partition(rp.PartitionIndex)
			}
			switch {
			case t == nil:
				pr.ErrorCode = kerr.UnknownTopicID.Code
			case reg == nil || !reg.Assigned():
				pr.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case reg.Leader == metadata.NoLeader:
				pr.ErrorCode = kerr.LeaderNotAvailable.Code
			case reg.LeaderEpoch >= rp.MinLeaderEpoch:
				pr.LeaderEpoch = reg.LeaderEpoch
			default:
				pr.LeaderEpoch = max(reg.LeaderEpoch+1, rp.MinLeaderEpoch)
				recs = append(recs, metadata.PartitionChangeRecord{TopicID: t.ID, Partition: rp.PartitionIndex, LeaderEpoch: pr.LeaderEpoch})
			}
			tr.Partitions = append(tr.Partitions, pr)
		}
		resp.Topics = append(resp.Topics, tr)
	}
	if len(recs) > 0 {
		if _, err := c.apply(ctx, "bumping leader epochs", recs); err != nil {
			resp.ErrorCode = errorCode(err)
			msg := err.Error()
			resp.ErrorMessage = &msg
		}
	}
	return resp
}
