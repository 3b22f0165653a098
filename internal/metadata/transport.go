package metadata

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/kmirror/kmirror/internal/netmux"
)

// Tuning of the network transport of a multi-node quorum.
const (
	// transportPoolSize is the number of idle connections kept per peer.
	transportPoolSize = 3
	// transportTimeout bounds each raft RPC's I/O and each dial (an InstallSnapshot gets
	// more, in proportion to the snapshot size).
	transportTimeout = 10 * time.Second
)

// newNetworkTransport returns the raft transport of a multi-node quorum: raft streams
// accepted from ln (connections that start with netmux.RaftByte) and dialled to peers with
// that byte first. advertised is the address peers dial to reach ln.
func newNetworkTransport(ln net.Listener, advertised string, log hclog.Logger) (*raft.NetworkTransport, *streamLayer) {
	s := newStreamLayer(ln, advertised)
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  s,
		MaxPool: transportPoolSize,
		Timeout: transportTimeout,
		Logger:  log.Named("net"),
	}), s
}

// streamLayer is the raft.StreamLayer of a multi-node quorum. It keeps every connection it
// dialled or accepted, so that Close ends them all at once and an RPC blocked on an
// unreachable peer cannot hold up raft's shutdown for the transport timeout.
type streamLayer struct {
	ln     net.Listener
	adv    raftAddr
	ctx    context.Context // cancels dials in progress at Close
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[*raftConn]struct{}
	closed atomic.Bool // written under mu
}

func newStreamLayer(ln net.Listener, advertised string) *streamLayer {
	ctx, cancel := context.WithCancel(context.Background())
	return &streamLayer{ln: ln, adv: raftAddr(advertised), ctx: ctx, cancel: cancel, conns: map[*raftConn]struct{}{}}
}

// raftAddr is an advertised raft address (host:port) as a net.Addr.
type raftAddr string

func (raftAddr) Network() string  { return "tcp" }
func (a raftAddr) String() string { return string(a) }

// Accept returns the next raft stream. Its first byte (netmux.RaftByte) is checked and
// dropped by the connection's first Read, so that a silent peer cannot stall Accept.
func (s *streamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	rc := &raftConn{Conn: c, s: s, magic: true}
	if !s.add(rc) {
		c.Close()
		return nil, net.ErrClosed
	}
	return rc, nil
}

// Dial connects to a peer's raft address and writes netmux.RaftByte, within timeout.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(s.ctx, "tcp", string(address))
	if err != nil {
		return nil, err
	}
	c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{netmux.RaftByte}); err != nil {
		c.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	rc := &raftConn{Conn: c, s: s}
	if !s.add(rc) {
		c.Close()
		return nil, net.ErrClosed
	}
	return rc, nil
}

func (s *streamLayer) add(c *raftConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// Close closes the listener, cancels dials and closes every stream. Calling it again is
// harmless.
func (s *streamLayer) Close() error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil
	}
	s.closed.Store(true)
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	s.cancel()
	err := s.ln.Close()
	for c := range conns {
		c.Conn.Close()
	}
	return err
}

// Addr returns the advertised address: raft puts it in its RPC headers for peers.
func (s *streamLayer) Addr() net.Addr { return s.adv }

// raftConn is one raft stream of a streamLayer.
type raftConn struct {
	net.Conn
	s *streamLayer

	mu    sync.Mutex
	magic bool // an accepted stream whose first byte is still to be checked
	once  sync.Once
}

func (c *raftConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.magic {
		var b [1]byte
		if _, err := io.ReadFull(c.Conn, b[:]); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		c.magic = false
		if b[0] != netmux.RaftByte {
			c.mu.Unlock()
			return 0, fmt.Errorf("not a raft stream: first byte %#02x from %v", b[0], c.RemoteAddr())
		}
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	if err != nil && c.s.closed.Load() {
		// Cut by Close: an end of stream, which raft's connection handler does not log
		// as an error.
		err = io.EOF
	}
	return n, err
}

func (c *raftConn) Close() error {
	var err error
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}
