package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/internal/controller"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// controllerChannel carries a broker's requests to the active controller (Kafka's
// NodeToControllerChannelManager): the controller of this process when it is active,
// otherwise the active controller's controller listener.
type controllerChannel interface {
	// Request sends req to the active controller and returns its answer; an answer of
	// NOT_CONTROLLER, or no reachable controller, is retried until ctx ends.
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Close()
}

// localChannel is the channel of a one-node cluster: its controller is in this process.
type localChannel struct{ c *controller.Controller }

func (l localChannel) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return retryNotController(ctx, func(ctx context.Context) (kmsg.Response, error) {
		if resp := l.c.Handle(ctx, req); resp != nil {
			return resp, nil
		}
		return nil, fmt.Errorf("the controller does not serve %s", kmsg.NameForKey(req.Key()))
	})
}

func (localChannel) Close() {}

// errorCodeOf returns the top-level error code of a controller response.
func errorCodeOf(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		return r.ErrorCode
	case *kmsg.BrokerHeartbeatResponse:
		return r.ErrorCode
	case *kmsg.AllocateProducerIDsResponse:
		return r.ErrorCode
	case *kmsg.AlterPartitionResponse:
		return r.ErrorCode
	case *kmsg.ElectLeadersResponse:
		return r.ErrorCode
	case interface{ GetErrorCode() int16 }:
		return r.GetErrorCode()
	}
	return 0
}

// retryNotController calls send until its answer is not NOT_CONTROLLER, backing off 50
// ms to 1 s between tries, until ctx ends (the last answer or error is returned then).
func retryNotController(ctx context.Context, send func(context.Context) (kmsg.Response, error)) (kmsg.Response, error) {
	backoff := 50 * time.Millisecond
	lastLog := time.Now()
	for {
		resp, err := send(ctx)
		if err == nil && errorCodeOf(resp) != kerr.NotController.Code {
			return resp, nil
		}
		if err == nil {
			err = kerr.NotController
		} else if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			slog.Warn("no active controller answered; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			if errors.Is(err, kerr.NotController) && resp != nil {
				return resp, nil
			}
			return nil, fmt.Errorf("no active controller answered: %w", err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// remoteChannel reaches the active controller of a multi-node cluster on its controller
// listener (the addresses of controller.quorum.voters), one franz-go client per voter;
// while the quorum has no known leader, voters are tried in turn (a follower answers
// NOT_CONTROLLER). On a controller node whose controller is active the request is
// handled in process.
type remoteChannel struct {
	self     int32
	local    *controller.Controller // nil on a broker-only node
	leader   func() (int32, bool)
	voters   []metadata.Voter
	clientID string

	mu      sync.Mutex
	clients map[int32]*kgo.Client
	next    int // voter tried next while no leader is known
	closed  bool
}

func newRemoteChannel(self int32, local *controller.Controller, leader func() (int32, bool), voters []metadata.Voter) *remoteChannel {
	return &remoteChannel{self: self, local: local, leader: leader, voters: voters,
		clientID: fmt.Sprintf("kmirror-broker-%d-controller-channel", self), clients: map[int32]*kgo.Client{}}
}

func (c *remoteChannel) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return retryNotController(ctx, func(ctx context.Context) (kmsg.Response, error) {
		id, ok := c.leader()
		if !ok {
			c.mu.Lock()
			id = c.voters[c.next%len(c.voters)].ID
			c.next++
			c.mu.Unlock()
		}
		if id == c.self && c.local != nil {
			if !c.local.Active() {
				return nil, kerr.NotController
			}
			if resp := c.local.Handle(ctx, req); resp != nil {
				return resp, nil
			}
			return nil, fmt.Errorf("the controller does not serve %s", kmsg.NameForKey(req.Key()))
		}
		cl, err := c.client(id)
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return cl.SeedBrokers()[0].Request(rctx, req)
	})
}

// client returns the client of voter id's controller listener.
func (c *remoteChannel) client(id int32) (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, net.ErrClosed
	}
	if cl := c.clients[id]; cl != nil {
		return cl, nil
	}
	for _, v := range c.voters {
		if v.ID == id {
			cl, err := kgo.NewClient(kgo.SeedBrokers(v.Addr), kgo.ClientID(c.clientID),
				kgo.DialTimeout(5*time.Second), kgo.RequestRetries(0), kgo.MaxVersions(interBrokerVersions()))
			if err != nil {
				return nil, err
			}
			c.clients[id] = cl
			return cl, nil
		}
	}
	return nil, fmt.Errorf("node %d is not a voter of controller.quorum.voters", id)
}

func (c *remoteChannel) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, cl := range c.clients {
		cl.Close()
	}
	c.clients = nil
}

// errorCodeOfErr is the Kafka error code of a controller-channel failure: the Kafka error
// itself, else REQUEST_TIMED_OUT (no active controller answered in time).
func errorCodeOfErr(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.RequestTimedOut.Code
}

// interBrokerVersions is the version table of kmirror's inter-node clients: franz-go's
// stable table plus kmirror's own RPCs (the mirror RPCs and ApplyRecords), which
// franz-go refuses to send otherwise.
func interBrokerVersions() *kversion.Versions {
	vs := mirrorproto.ClientVersions()
	vs.SetMaxKeyVersion(controller.ApplyRecordsKey, 0)
	return vs
}
