package wire

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// startLimitedServer runs a Server with limits and handler h (the echo handler when nil).
func startLimitedServer(t *testing.T, l *Limits, h Handler) (*Server, string) {
	t.Helper()
	if h == nil {
		h = &echoHandler{}
	}
	s := &Server{Versions: testVersions(), MaxRequestBytes: 1 << 20, NewRequest: kmsg.RequestForKey, Handler: h, Limits: l}
	return s, serveUntilCleanup(t, s)
}

// metadataFrame is a sized Metadata v8 request frame with correlation ID corr naming
// topics (each topic name adds its length plus 2 bytes).
func metadataFrame(corr int32, topics ...string) []byte {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(8)
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	return sized(append(header(3, 8, corr, nil, false, nil), req.AppendTo(nil)...))
}

// roundTrip sends one Metadata request on nc and reads its answer; the error is the
// read's (io.EOF when the server closed the connection).
func roundTrip(nc net.Conn, corr int32) error {
	if _, err := nc.Write(metadataFrame(corr)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return err
	}
	_, err := io.CopyN(io.Discard, nc, int64(size[0])<<24|int64(size[1])<<16|int64(size[2])<<8|int64(size[3]))
	return err
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// max.connections.per.ip: a connection beyond the limit is closed at once, the others
// keep being served, and a slot freed by a close is taken by the next connection; an
// override raises the limit of its address.
func TestMaxConnectionsPerIP(t *testing.T) {
	_, addr := startLimitedServer(t, &Limits{MaxConnectionsPerIP: 2}, nil)
	a, b := dial(t, addr), dial(t, addr)
	for i, nc := range []net.Conn{a, b} {
		if err := roundTrip(nc, int32(i)); err != nil {
			t.Fatalf("connection %d within the limit: %v", i, err)
		}
	}
	if err := roundTrip(dial(t, addr), 3); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("third connection from 127.0.0.1 with max.connections.per.ip=2: %v, want it closed", err)
	}
	if err := roundTrip(a, 4); err != nil {
		t.Fatalf("connection within the limit after the refused one: %v", err)
	}
	a.Close()
	for i := int32(5); ; i++ { // the server sees the close asynchronously
		if err := roundTrip(dial(t, addr), i); err == nil {
			break
		}
	}

	overrides, err := ParseIPOverrides("127.0.0.1:3, localhost:3")
	if err != nil {
		t.Fatal(err)
	}
	_, addr = startLimitedServer(t, &Limits{MaxConnectionsPerIP: 1, PerIPOverrides: overrides}, nil)
	for i := int32(0); i < 3; i++ {
		if err := roundTrip(dial(t, addr), i); err != nil {
			t.Fatalf("connection %d within the override 127.0.0.1:3: %v", i, err)
		}
	}
	if err := roundTrip(dial(t, addr), 3); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("fourth connection with override 127.0.0.1:3: %v, want it closed", err)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// max.connections: at the limit the server stops accepting; a connection waiting in the
// backlog is served once an open one closes.
func TestMaxConnectionsWaitsForASlot(t *testing.T) {
	s, addr := startLimitedServer(t, &Limits{MaxConnections: 1}, nil)
	a := dial(t, addr)
	if err := roundTrip(a, 1); err != nil {
		t.Fatal(err)
	}
	b := dial(t, addr) // connected by the kernel, not accepted by the server
	if _, err := b.Write(metadataFrame(2)); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	n := len(s.conns)
	s.mu.Unlock()
	if n != 1 {
		t.Fatalf("server holds %d connections with max.connections=1", n)
	}
	a.Close()
	r := bufio.NewReader(b)
	if corr, _ := readResponse(t, r); corr != 2 {
		t.Fatalf("waiting connection answered with correlation %d, want 2", corr)
	}
}

// max.connections reached on one listener: a protected listener (the inter-broker one)
// sharing the limits still accepts and serves, and its connections take no slot.
func TestMaxConnectionsProtectedListener(t *testing.T) {
	l := &Limits{MaxConnections: 1}
	_, addr := startLimitedServer(t, l, nil)
	paddr := serveUntilCleanup(t, &Server{Versions: testVersions(), MaxRequestBytes: 1 << 20, NewRequest: kmsg.RequestForKey, Handler: &echoHandler{}, Limits: l, Protected: true})
	a := dial(t, addr)
	if err := roundTrip(a, 1); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := roundTrip(dial(t, paddr), int32(10+i)); err != nil {
			t.Fatalf("protected listener, connection %d with max.connections=1 reached: %v", i+1, err)
		}
	}
	a.Close()
	if err := roundTrip(dial(t, addr), 2); err != nil {
		t.Fatalf("the other listener after its connection closed, protected ones still open: %v", err)
	}
}

// blockingHandler holds every request whose first topic is "hold" until release is
// closed, and counts the requests it has seen.
type blockingHandler struct {
	release chan struct{}
	mu      sync.Mutex
	seen    []int32
}

func (h *blockingHandler) Handle(_ context.Context, req *Request) kmsg.Response {
	h.mu.Lock()
	h.seen = append(h.seen, req.Header.CorrelationID)
	h.mu.Unlock()
	if md, ok := req.Body.(*kmsg.MetadataRequest); ok && len(md.Topics) > 0 && *md.Topics[0].Topic == "hold" {
		<-h.release
	}
	return req.Body.ResponseKind()
}

// queued.max.request.bytes: while requests read and not answered hold the pool, no
// connection reads another; once they are answered the waiting one is read and served.
func TestQueuedMaxRequestBytes(t *testing.T) {
	l := &Limits{QueuedMaxRequestBytes: 1000}
	h := &blockingHandler{release: make(chan struct{})}
	_, addr := startLimitedServer(t, l, h)
	big := make([]string, 0, 100)
	big = append(big, "hold")
	for len(big) < 100 {
		big = append(big, "padding-topic-name")
	}
	a, b := dial(t, addr), dial(t, addr)
	if _, err := a.Write(metadataFrame(1, big...)); err != nil { // ~2 KB: past the pool
		t.Fatal(err)
	}
	for {
		h.mu.Lock()
		n := len(h.seen)
		h.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Write(metadataFrame(2)); err != nil {
		t.Fatal(err)
	}
	for { // b's reader waits for room in the pool
		l.mu.Lock()
		w := l.waiting
		l.mu.Unlock()
		if w == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	h.mu.Lock()
	seen := len(h.seen)
	h.mu.Unlock()
	if seen != 1 {
		t.Fatalf("%d requests handled while the pool was full, want 1", seen)
	}
	close(h.release)
	if corr, _ := readResponse(t, bufio.NewReader(a)); corr != 1 {
		t.Fatalf("held request answered with correlation %d", corr)
	}
	if corr, _ := readResponse(t, bufio.NewReader(b)); corr != 2 {
		t.Fatalf("waiting request answered with correlation %d", corr)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used != 0 {
		t.Fatalf("%d request bytes still reserved after every request was answered", l.used)
	}
}

func TestParseIPOverrides(t *testing.T) {
	got, err := ParseIPOverrides("127.0.0.1:200, ::1:5")
	if err != nil || got["127.0.0.1"] != 200 || got["::1"] != 5 {
		t.Fatalf("ParseIPOverrides: %v %v", got, err)
	}
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:x", ":3"} {
		if _, err := ParseIPOverrides(bad); err == nil {
			t.Errorf("ParseIPOverrides(%q) accepted", bad)
		}
	}
}
