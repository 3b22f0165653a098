package netmux

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testWait bounds every wait of these tests; a healthy run never comes close.
const testWait = 10 * time.Second

func newMux(t *testing.T) *Mux {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return newMuxOn(t, l)
}

func newMuxOn(t *testing.T, l net.Listener) *Mux {
	t.Helper()
	m := New(l, slog.New(slog.DiscardHandler))
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()
	t.Cleanup(func() {
		m.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return m
}

// dialSend connects to addr and writes data (if any).
func dialSend(t *testing.T, addr net.Addr, data []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if len(data) > 0 {
		if _, err := c.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

type accepted struct {
	c   net.Conn
	err error
}

// acceptAsync accepts one connection from l in the background.
func acceptAsync(l net.Listener) <-chan accepted {
	ch := make(chan accepted, 1)
	go func() {
		c, err := l.Accept()
		ch <- accepted{c, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan accepted) net.Conn {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("Accept: %v", a.err)
		}
		t.Cleanup(func() { a.c.Close() })
		return a.c
	case <-time.After(testWait):
		t.Fatal("no connection accepted")
		return nil
	}
}

// readN reads exactly len(want) bytes from c and compares them.
func readN(t *testing.T, c net.Conn, want []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(testWait))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %x, want %x", got, want)
	}
}

// expectClosed checks that the peer closes c without sending anything.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(testWait))
	var b [1]byte
	n, err := c.Read(b[:])
	if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
	}
}

func TestRouting(t *testing.T) {
	m := newMux(t)
	kafka, raft := m.Default(), m.Claim(RaftByte)
	if kafka != m.Default() {
		t.Fatal("Default returned another listener")
	}
	if kafka.Addr().String() != m.Addr().String() || raft.Addr().String() != m.Addr().String() {
		t.Fatalf("sub-listener addresses %v %v, want %v", kafka.Addr(), raft.Addr(), m.Addr())
	}

	raftMsg := []byte{RaftByte, 'r', 'a', 'f', 't'}
	kafkaMsg := []byte{0, 0, 0, 4, 'k', 'a', 'f', 'k'}
	otherMsg := []byte{0x42, 'x'} // unclaimed: goes to Default
	for _, tc := range []struct {
		name string
		l    net.Listener
		msg  []byte
	}{{"raft", raft, raftMsg}, {"kafka", kafka, kafkaMsg}, {"unclaimed", kafka, otherMsg}} {
		t.Run(tc.name, func(t *testing.T) {
			ch := acceptAsync(tc.l)
			client := dialSend(t, m.Addr(), tc.msg)
			server := await(t, ch)
			readN(t, server, tc.msg) // the first byte is replayed
			if runtime.GOOS == "linux" {
				if _, ok := server.(*net.TCPConn); !ok {
					t.Fatalf("routed connection is %T, want *net.TCPConn (sendfile)", server)
				}
			}
			// Both directions still work.
			if _, err := server.Write([]byte("ok")); err != nil {
				t.Fatal(err)
			}
			readN(t, client, []byte("ok"))
		})
	}
}

func TestUnclaimedWithoutDefaultIsClosed(t *testing.T) {
	m := newMux(t)
	raft := m.Claim(RaftByte)
	c := dialSend(t, m.Addr(), []byte{0, 0, 0, 1, 0})
	expectClosed(t, c)

	// The mux keeps routing.
	ch := acceptAsync(raft)
	dialSend(t, m.Addr(), []byte{RaftByte})
	readN(t, await(t, ch), []byte{RaftByte})
}

func TestSilentClientDoesNotBlockOthers(t *testing.T) {
	m := newMux(t)
	kafka := m.Default()
	silent := dialSend(t, m.Addr(), nil)
	ch := acceptAsync(kafka)
	dialSend(t, m.Addr(), []byte{0, 0, 0, 0})
	readN(t, await(t, ch), []byte{0, 0, 0, 0})

	// Once the silent client sends its byte it is routed too.
	ch = acceptAsync(kafka)
	if _, err := silent.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	readN(t, await(t, ch), []byte{1})
}

func TestSilentClientIsClosedAfterTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := New(l, slog.New(slog.DiscardHandler))
	m.timeout = 50 * time.Millisecond
	m.Default()
	go m.Serve()
	defer m.Close()
	expectClosed(t, dialSend(t, m.Addr(), nil))
}

func TestClose(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := New(l, slog.New(slog.DiscardHandler))
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()
	kafka, raft := m.Default(), m.Claim(RaftByte)

	// A routed connection survives Close; a pending one (no first byte yet) does not.
	ch := acceptAsync(kafka)
	routed := dialSend(t, m.Addr(), []byte{0})
	server := await(t, ch)
	pending := dialSend(t, m.Addr(), nil)
	blockedK, blockedR := acceptAsync(kafka), acceptAsync(raft)

	// Closing one sub-listener leaves the others working; its connections are closed.
	if err := raft.Close(); err != nil {
		t.Fatal(err)
	}
	if a := <-blockedR; !errors.Is(a.err, net.ErrClosed) {
		t.Fatalf("Accept on a closed sub-listener: %v, %v", a.c, a.err)
	}
	expectClosed(t, dialSend(t, m.Addr(), []byte{RaftByte}))
	dialSend(t, m.Addr(), []byte{5})
	readN(t, await(t, blockedK), []byte{5})

	blockedK = acceptAsync(kafka)
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
	if a := <-blockedK; !errors.Is(a.err, net.ErrClosed) {
		t.Fatalf("blocked Accept after Close: %v, %v", a.c, a.err)
	}
	for _, sl := range []net.Listener{kafka, raft, m.Claim(0x80)} {
		if _, err := sl.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v", err)
		}
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("underlying listener still open: %v", err)
	}
	expectClosed(t, pending)
	if _, err := server.Write([]byte("still")); err != nil {
		t.Fatalf("routed connection closed by Close: %v", err)
	}
	readN(t, routed, []byte("still"))
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestClaimTwicePanics(t *testing.T) {
	m := New(nil, nil)
	m.Claim(RaftByte)
	defer func() {
		if recover() == nil {
			t.Fatal("second Claim of one byte did not panic")
		}
	}()
	m.Claim(RaftByte)
}

// pipeListener is a net.Listener of in-memory connections, which cannot be peeked into:
// it exercises the read-and-replay path.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (p *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeListener) Close() error   { p.once.Do(func() { close(p.done) }); return nil }
func (p *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "unix"} }

func (p *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	p.conns <- server
	return client
}

func TestReplayWithoutPeek(t *testing.T) {
	pl := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	m := newMuxOn(t, pl)
	kafka, raft := m.Default(), m.Claim(RaftByte)
	for _, tc := range []struct {
		l   net.Listener
		msg []byte
	}{{raft, []byte{RaftByte, 1, 2, 3}}, {kafka, []byte{0, 0, 0, 9}}} {
		ch := acceptAsync(tc.l)
		client := pl.dial()
		go client.Write(tc.msg)
		server := await(t, ch)
		if _, ok := server.(*replayConn); !ok {
			t.Fatalf("routed connection is %T, want *replayConn", server)
		}
		readN(t, server, tc.msg)
		client.Close()
	}
}

func TestListenerFailureClosesSubListeners(t *testing.T) {
	pl := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	m := New(pl, slog.New(slog.DiscardHandler))
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()
	ch := acceptAsync(m.Default())
	pl.Close() // the listener fails under the Mux
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Serve after a listener failure: %v", err)
	}
	if a := <-ch; !errors.Is(a.err, net.ErrClosed) {
		t.Fatalf("Accept after a listener failure: %v, %v", a.c, a.err)
	}
	if retriable(net.ErrClosed) || !retriable(syscall.EMFILE) {
		t.Fatal("retriable")
	}
}
