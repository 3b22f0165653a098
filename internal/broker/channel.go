package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/controller"
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
	case interface{ GetErrorCode() int16 }:
		return r.GetErrorCode()
	}
	return 0
}

// retryNotController calls send until its answer is not NOT_CONTROLLER, backing off 50
// ms to 1 s between tries, until ctx ends (the last answer or error is returned then).
func retryNotController(ctx context.Context, send func(context.Context) (kmsg.Response, error)) (kmsg.Response, error) {
	backoff := 50 * time.Millisecond
	for {
		resp, err := send(ctx)
		if err == nil && errorCodeOf(resp) != kerr.NotController.Code {
			return resp, nil
		}
		if err == nil {
			err = kerr.NotController
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
