package broker

// The broker's life as the controller sees it (Kafka's BrokerLifecycleManager): it
// registers, heartbeats every broker.heartbeat.interval.ms with the metadata offset it has
// applied, is unfenced once caught up, registers again when the controller no longer
// knows its broker epoch, and on shutdown asks for a controlled shutdown so that its
// leaderships move away before it stops.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
)

// lifecycle is the registration and heartbeat state of this broker.
type lifecycle struct {
	b           *Broker
	incarnation metadata.TopicID
	interval    time.Duration
	session     time.Duration // broker.session.timeout.ms

	mu        sync.Mutex
	epoch     int64 // broker epoch; −1 until registered
	fenced    bool
	unfenced  chan struct{} // closed when first unfenced
	shutdown  bool          // WantShutdown from now on
	canStop   chan struct{} // closed when the controller answers ShouldShutdown
	lastError error
}

func newLifecycle(b *Broker, interval, session time.Duration) *lifecycle {
	if interval <= 0 {
		interval = 2 * time.Second // broker.heartbeat.interval.ms
	}
	if session <= 0 {
		session = 9 * time.Second // broker.session.timeout.ms
	}
	return &lifecycle{b: b, incarnation: metadata.NewTopicID(), interval: interval, session: session, epoch: -1, fenced: true,
		unfenced: make(chan struct{}), canStop: make(chan struct{})}
}

// BrokerEpoch is this broker's epoch, −1 before its registration.
func (lc *lifecycle) BrokerEpoch() int64 {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.epoch
}

// register sends BrokerRegistration until the controller accepts it. A refusal that
// retrying cannot change is returned: another cluster ID, or a duplicate node.id that
// lasts longer than a session. The controller refuses a registration with
// DUPLICATE_BROKER_REGISTRATION while another incarnation of the node.id holds a live
// session: that is this node's previous process, killed a moment ago, until its session
// expires (broker.session.timeout.ms), or another live node with the same node.id, which
// keeps its session; Kafka's brokers retry it, kmirror retries for a session timeout and
// two heartbeat intervals, then refuses to start.
func (lc *lifecycle) register(ctx context.Context) error {
	var duplicateSince time.Time
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID = lc.b.nodeID
	req.ClusterID = lc.b.clusterID // meta.properties', checked by the controller
	req.IncarnationID = lc.incarnation
	req.PreviousBrokerEpoch = lc.b.logs.PreviousBrokerEpoch()
	if lc.b.rack != "" {
		req.Rack = &lc.b.rack
	}
	for _, e := range lc.b.endpoints {
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port = e.Name, e.Host, uint16(e.Port)
		l.SecurityProtocol = securityProtocolIDs[e.SecurityProtocol]
		req.Listeners = append(req.Listeners, l)
	}
	for {
		resp, err := lc.b.channel.Request(ctx, req)
		if err == nil {
			r := resp.(*kmsg.BrokerRegistrationResponse)
			switch r.ErrorCode {
			case 0:
				lc.mu.Lock()
				lc.epoch = r.BrokerEpoch
				lc.mu.Unlock()
				lc.b.logs.SetBrokerEpoch(r.BrokerEpoch)
				lc.b.logger.Info("registered with the controller", "node.id", lc.b.nodeID, "brokerEpoch", r.BrokerEpoch)
				return nil
			case kerr.DuplicateBrokerRegistration.Code:
				if duplicateSince.IsZero() {
					duplicateSince = time.Now()
					lc.b.logger.Info("the controller holds a live session for this node.id (this node's previous process, until its session expires, or another node with this node.id); retrying the registration",
						"node.id", lc.b.nodeID, "broker.session.timeout.ms", lc.session.Milliseconds())
				}
				if time.Since(duplicateSince) > lc.session+2*lc.interval {
					return fmt.Errorf("node.id %d: another broker is registered with that node.id and alive (two nodes with one node.id?)", lc.b.nodeID)
				}
			case kerr.InconsistentClusterID.Code:
				return fmt.Errorf("the controller's cluster ID is not this node's %s (meta.properties in %s): this node was formatted for another cluster", req.ClusterID, lc.b.dataDir)
			}
			err = kerr.ErrorForCode(r.ErrorCode)
		}
		lc.noteError(err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("registering with the controller: %w", err)
		case <-time.After(lc.interval / 4):
		}
	}
}

func (lc *lifecycle) noteError(err error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if err != nil && (lc.lastError == nil || lc.lastError.Error() != err.Error()) {
		lc.b.logger.Warn("controller request failed", "node.id", lc.b.nodeID, "err", err)
	}
	lc.lastError = err
}

// heartbeat sends one BrokerHeartbeat and applies its answer; a broker epoch the
// controller no longer knows makes it register again.
func (lc *lifecycle) heartbeat(ctx context.Context) error {
	lc.mu.Lock()
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch, req.WantShutdown = lc.b.nodeID, lc.epoch, lc.shutdown
	lc.mu.Unlock()
	req.CurrentMetadataOffset = int64(lc.b.rm.Image().Offset)
	hctx, cancel := context.WithTimeout(ctx, lc.interval*2)
	resp, err := lc.b.channel.Request(hctx, req)
	cancel()
	if err != nil {
		return err
	}
	r := resp.(*kmsg.BrokerHeartbeatResponse)
	switch r.ErrorCode {
	case 0:
	case kerr.StaleBrokerEpoch.Code, kerr.BrokerIDNotRegistered.Code:
		lc.b.logger.Warn("the controller does not know this broker epoch; registering again", "brokerEpoch", req.BrokerEpoch)
		return lc.register(ctx)
	default:
		return kerr.ErrorForCode(r.ErrorCode)
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.fenced && !r.IsFenced {
		lc.b.logger.Info("unfenced by the controller", "node.id", lc.b.nodeID, "brokerEpoch", lc.epoch)
		select {
		case <-lc.unfenced:
		default:
			close(lc.unfenced)
		}
	}
	lc.fenced = r.IsFenced
	if r.ShouldShutdown && lc.shutdown {
		select {
		case <-lc.canStop:
		default:
			close(lc.canStop)
		}
	}
	return nil
}

// run heartbeats until ctx ends (after a controlled shutdown finished, or at close).
func (lc *lifecycle) run(ctx context.Context) {
	t := time.NewTicker(lc.interval)
	defer t.Stop()
	for {
		lc.noteError(lc.heartbeat(ctx))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// awaitUnfenced waits until the controller unfenced this broker and this node's image
// says so (decisions taken from the local image, such as replica placement, then count
// it), heartbeating faster than the interval meanwhile (Kafka's initial catch-up).
func (lc *lifecycle) awaitUnfenced(ctx context.Context) error {
	for {
		if err := lc.heartbeat(ctx); err != nil && !errors.Is(err, context.Canceled) {
			lc.noteError(err)
		}
		select {
		case <-lc.unfenced:
			if br, ok := lc.b.meta.Image().Broker(lc.b.nodeID); ok && !br.Fenced {
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		case <-ctx.Done():
			return fmt.Errorf("not unfenced by the controller: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// controlledShutdown asks the controller to move this broker's leaderships away and
// waits until it says the broker may stop, or ctx ends (Kafka's
// BrokerLifecycleManager.beginControlledShutdown with controlled.shutdown's wait).
func (lc *lifecycle) controlledShutdown(ctx context.Context) {
	lc.mu.Lock()
	if lc.epoch < 0 {
		lc.mu.Unlock()
		return
	}
	lc.shutdown = true
	lc.mu.Unlock()
	// Without an active controller (the quorum lost its majority: the cluster is stopping)
	// nobody can move the leaderships: stop after a few heartbeat intervals in vain.
	failures := 0
	for {
		if err := lc.heartbeat(ctx); err != nil {
			lc.noteError(err)
			if failures++; failures >= 5 {
				lc.b.logger.Warn("controlled shutdown: no active controller answers; stopping without it")
				return
			}
		} else {
			failures = 0
		}
		select {
		case <-lc.canStop:
			lc.b.logger.Info("controlled shutdown: the controller moved this broker's leaderships away")
			return
		case <-ctx.Done():
			lc.b.logger.Warn("controlled shutdown did not complete in time; stopping anyway")
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// securityProtocolIDs are Kafka's SecurityProtocol IDs of the registration's listeners.
var securityProtocolIDs = map[string]int16{"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
