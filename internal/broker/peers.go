package broker

// Requests to the other brokers of the cluster (Kafka's NodeToBrokerChannel-style
// inter-broker clients): transaction markers to partition leaders, transaction
// verification at transaction coordinators, mirror states at their coordinators. Each
// peer is reached on its inter.broker.listener.name endpoint from its registration.

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// peerClient is one franz-go client to one broker, for the endpoint it was built for.
type peerClient struct {
	addr string
	cl   *kgo.Client
}

// peers holds the clients to the other brokers. Safe for concurrent use.
type peers struct {
	b       *Broker
	mu      sync.Mutex
	clients map[int32]*peerClient
	closed  bool
}

// peerRequestTimeout bounds one inter-broker request.
const peerRequestTimeout = 10 * time.Second

// request sends req to broker id and returns its answer. Errors: the broker is not
// registered or has no inter-broker endpoint, or the request failed on the wire.
func (p *peers) request(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	cl, err := p.client(id)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, peerRequestTimeout)
	defer cancel()
	return cl.SeedBrokers()[0].Request(rctx, req)
}

// client returns the client of broker id for its current inter-broker endpoint.
func (p *peers) client(id int32) (*kgo.Client, error) {
	addr, err := p.b.interBrokerAddr(id)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, net.ErrClosed
	}
	if pc := p.clients[id]; pc != nil {
		if pc.addr == addr {
			return pc.cl, nil
		}
		pc.cl.Close() // the broker registered again on another address
	}
	sec, err := p.b.clientOpts(p.b.interBrokerListener())
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(sec, kgo.SeedBrokers(addr), kgo.ClientID(fmt.Sprintf("kmirror-broker-%d", p.b.nodeID)),
		kgo.DialTimeout(5*time.Second), kgo.RequestRetries(0), kgo.MaxVersions(interBrokerVersions()))...)
	if err != nil {
		return nil, err
	}
	if p.clients == nil {
		p.clients = map[int32]*peerClient{}
	}
	p.clients[id] = &peerClient{addr: addr, cl: cl}
	return cl, nil
}

func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, pc := range p.clients {
		pc.cl.Close()
	}
	p.clients = nil
}

// interBrokerAddr is broker id's host:port on the inter-broker listener (the client
// listener when inter.broker.listener.name is not set), from its registration.
func (b *Broker) interBrokerAddr(id int32) (string, error) {
	br, ok := b.rm.Image().Broker(id)
	if !ok {
		return "", fmt.Errorf("broker %d is not registered", id)
	}
	name := b.interBrokerListener()
	e, ok := br.Endpoint(name)
	if !ok {
		return "", fmt.Errorf("broker %d has no %s endpoint", id, name)
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), nil
}

// interBrokerListener is the listener this broker reaches other brokers on:
// inter.broker.listener.name, else the client listener.
func (b *Broker) interBrokerListener() string {
	if name := b.node.InterBrokerListenerName; name != "" {
		return name
	}
	return b.clientListener()
}
