// Package netmux shares one TCP port between several protocols by the first byte of each
// connection, as Consul does for its raft and RPC traffic: kmirror serves Kafka requests
// and the metadata quorum's raft streams on the controller listener's single port.
//
// A Kafka-protocol connection starts with the 4-byte big-endian size of its first request,
// and kmirror refuses requests over 100 MiB (0x06400000 bytes, socket.request.max.bytes),
// so its first byte is 0x00–0x06. Any byte with the high bit set would make that size a
// negative int32, which no Kafka client sends whatever the size limit, so such bytes are
// free to mark other protocols (RaftByte).
package netmux

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// RaftByte (0xA7) is the first byte of every raft stream of the metadata quorum: the
// dialer writes it before any raft data and the acceptor checks and drops it. It has the
// high bit set, so no Kafka request (first byte 0x00–0x06, see the package comment) can be
// mistaken for raft or the other way round.
const RaftByte byte = 0xA7

// DefaultFirstByteTimeout is how long a new connection may take to send its first byte
// before the Mux closes it, so that a silent client cannot hold a goroutine forever.
const DefaultFirstByteTimeout = 10 * time.Second

// Mux accepts connections from one net.Listener and hands each to the sub-listener that
// claimed its first byte (Claim), or else to the Default sub-listener. The first byte stays
// part of the stream: whoever accepts the connection reads it again. On Linux a TCP
// connection is routed as the original *net.TCPConn (the byte is peeked, not read), so
// sendfile keeps working on it. Safe for concurrent use.
type Mux struct {
	l       net.Listener
	log     *slog.Logger
	timeout time.Duration // first-byte deadline; tests shorten it

	mu      sync.Mutex
	claimed map[byte]*subListener
	def     *subListener
	pending map[net.Conn]struct{} // connections whose first byte is awaited
	closed  bool
	wg      sync.WaitGroup // routing goroutines
}

// New returns a Mux over l; nothing is accepted until Serve. A nil logger uses
// slog.Default(). The Mux owns l: Close closes it.
func New(l net.Listener, logger *slog.Logger) *Mux {
	if logger == nil {
		logger = slog.Default()
	}
	return &Mux{
		l:       l,
		log:     logger,
		timeout: DefaultFirstByteTimeout,
		claimed: map[byte]*subListener{},
		pending: map[net.Conn]struct{}{},
	}
}

// Addr returns the address of the underlying listener.
func (m *Mux) Addr() net.Addr { return m.l.Addr() }

// Default returns the sub-listener of every connection whose first byte no Claim took
// (Kafka's, in kmirror); each call returns the same listener. Without a Default such
// connections are closed.
func (m *Mux) Default() net.Listener {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.def == nil {
		m.def = m.newSub()
	}
	return m.def
}

// Claim returns the sub-listener of the connections whose first byte is b. It panics if b
// is already claimed (a programming error).
func (m *Mux) Claim(b byte) net.Listener {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.claimed[b]; ok {
		panic("netmux: first byte already claimed")
	}
	s := m.newSub()
	m.claimed[b] = s
	return s
}

// newSub returns a new sub-listener, already closed if the Mux is. m.mu must be held.
func (m *Mux) newSub() *subListener {
	s := &subListener{m: m, conns: make(chan net.Conn), done: make(chan struct{})}
	if m.closed {
		s.Close()
	}
	return s
}

// Serve accepts connections until Close or until the underlying listener fails; it
// returns nil after Close, else the listener's error (then the Mux is closed too, so every
// sub-listener's Accept fails). Call it once, usually in its own goroutine.
func (m *Mux) Serve() error {
	var delay time.Duration
	for {
		c, err := m.l.Accept()
		if err != nil {
			if m.isClosed() {
				return nil
			}
			if retriable(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				m.log.Warn("accepting a connection failed; retrying", "addr", m.l.Addr(), "err", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			m.Close()
			return err
		}
		delay = 0
		if !m.track(c) {
			c.Close()
			return nil
		}
		go m.route(c)
	}
}

// retriable reports whether an Accept error is transient (out of file descriptors, a
// timeout), so that Serve backs off and goes on instead of giving up.
func retriable(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.As(err, &ne) && ne.Timeout()
}

// track registers c as awaiting its first byte, unless the Mux is closed.
func (m *Mux) track(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.pending[c] = struct{}{}
	m.wg.Add(1)
	return true
}

// route reads c's first byte and hands c to the sub-listener for it.
func (m *Mux) route(c net.Conn) {
	defer m.wg.Done()
	b, routed, err := sniff(c, m.timeout)
	m.mu.Lock()
	delete(m.pending, c)
	s := m.claimed[b]
	if s == nil {
		s = m.def
	}
	m.mu.Unlock()
	if err != nil {
		m.log.Debug("closing a connection that sent no first byte", "remote", c.RemoteAddr(), "err", err)
		c.Close()
		return
	}
	if s == nil {
		m.log.Debug("closing a connection of an unknown protocol", "remote", c.RemoteAddr(), "firstByte", b)
		c.Close()
		return
	}
	select {
	case s.conns <- routed:
	case <-s.done:
		routed.Close()
	}
}

// sniff returns c's first byte and the connection to hand on, which still yields that
// byte first: c itself when the byte could be peeked, else c wrapped with the byte.
func sniff(c net.Conn, timeout time.Duration) (byte, net.Conn, error) {
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return 0, nil, err
	}
	b, peeked, err := peek(c)
	var routed net.Conn = c
	if !peeked && err == nil {
		var buf [1]byte
		if _, err = io.ReadFull(c, buf[:]); err == nil {
			b = buf[0]
			routed = &replayConn{Conn: c, first: b, pending: true}
		}
	}
	if err != nil {
		return 0, nil, err
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return 0, nil, err
	}
	return b, routed, nil
}

func (m *Mux) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// Close closes the underlying listener, every sub-listener (their Accept returns an error
// matching net.ErrClosed) and every connection not yet handed on; connections already
// accepted through a sub-listener stay open. It waits for the routing goroutines. Calling
// it again is harmless.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	subs := make([]*subListener, 0, len(m.claimed)+1)
	for _, s := range m.claimed {
		subs = append(subs, s)
	}
	if m.def != nil {
		subs = append(subs, m.def)
	}
	for c := range m.pending {
		c.Close()
	}
	m.mu.Unlock()
	err := m.l.Close()
	for _, s := range subs {
		s.Close()
	}
	m.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// subListener is one protocol's view of the Mux.
type subListener struct {
	m     *Mux
	conns chan net.Conn // unbuffered: a connection is handed on only to a waiting Accept
	done  chan struct{}
	once  sync.Once
}

// Accept waits for the next connection routed to this listener.
func (s *subListener) Accept() (net.Conn, error) {
	select {
	case <-s.done:
		return nil, s.closedErr()
	default:
	}
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, s.closedErr()
	}
}

func (s *subListener) closedErr() error {
	return &net.OpError{Op: "accept", Net: s.m.l.Addr().Network(), Addr: s.m.l.Addr(), Err: net.ErrClosed}
}

// Close stops this listener only: the Mux keeps serving the others and closes the
// connections that would have come here.
func (s *subListener) Close() error {
	s.once.Do(func() { close(s.done) })
	return nil
}

// Addr returns the address of the Mux's listener.
func (s *subListener) Addr() net.Addr { return s.m.l.Addr() }

// replayConn returns the first byte, already read by sniff, before the rest of Conn.
type replayConn struct {
	net.Conn
	mu      sync.Mutex
	first   byte
	pending bool
}

func (c *replayConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.pending && len(p) > 0 {
		c.pending = false
		c.mu.Unlock()
		p[0] = c.first
		return 1, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}
