package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// echoHandler answers every request with its empty response kind and records headers.
type echoHandler struct {
	mu      sync.Mutex
	headers []Header
}

func (h *echoHandler) Handle(_ context.Context, req *Request) kmsg.Response {
	h.mu.Lock()
	h.headers = append(h.headers, req.Header)
	h.mu.Unlock()
	return req.Body.ResponseKind()
}

// testVersions is the version table of the test servers: every request kmsg knows, at
// every version it encodes.
func testVersions() *Versions {
	ranges := map[int16]VersionRange{}
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		if r := kmsg.RequestForKey(k); r != nil {
			ranges[k] = VersionRange{Min: 0, Max: r.MaxVersion()}
		}
	}
	return NewVersions(ranges)
}

func startServer(t *testing.T) (*Server, *echoHandler, string) {
	t.Helper()
	h := &echoHandler{}
	s := &Server{Versions: testVersions(), MaxRequestBytes: 1 << 20, NewRequest: kmsg.RequestForKey, Handler: h}
	return s, h, serveUntilCleanup(t, s)
}

// serveUntilCleanup serves s on a loopback port until the test ends; it returns the address.
func serveUntilCleanup(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return ln.Addr().String()
}

// header encodes a request header: v1 (client ID, nullable when id is nil) or v2
// (plus a tagged-field section holding tags).
func header(key, version int16, corr int32, id *string, v2 bool, tags []byte) []byte {
	out := binary.BigEndian.AppendUint16(nil, uint16(key))
	out = binary.BigEndian.AppendUint16(out, uint16(version))
	out = binary.BigEndian.AppendUint32(out, uint32(corr))
	if id == nil {
		out = binary.BigEndian.AppendUint16(out, 0xffff)
	} else {
		out = binary.BigEndian.AppendUint16(out, uint16(len(*id)))
		out = append(out, *id...)
	}
	if v2 {
		out = append(out, tags...)
	}
	return out
}

func sized(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func readResponse(t *testing.T, r io.Reader) (int32, []byte) {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:]
}

// TestRequestHeaderVersions: header v1 with a null client ID, header v2 with tagged
// fields in it, and the response headers that go with them (v0 for non-flexible
// requests and ApiVersions, v1 with an empty tag section for flexible ones). Requests
// pipelined on one connection are answered in order.
func TestRequestHeaderVersions(t *testing.T) {
	_, h, addr := startServer(t)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	id := "client-a"
	md8 := kmsg.NewPtrMetadataRequest()
	md8.SetVersion(8)
	md12 := kmsg.NewPtrMetadataRequest()
	md12.SetVersion(12)
	av3 := kmsg.NewPtrApiVersionsRequest()
	av3.SetVersion(3)
	// One tagged field in the v2 header: count 1, tag 5, size 2, two bytes.
	tags := []byte{1, 5, 2, 0xaa, 0xbb}
	var out []byte
	out = append(out, sized(append(header(3, 8, 1, nil, false, nil), md8.AppendTo(nil)...))...)
	out = append(out, sized(append(header(3, 12, 2, &id, true, tags), md12.AppendTo(nil)...))...)
	out = append(out, sized(append(header(18, 3, 3, &id, true, []byte{0}), av3.AppendTo(nil)...))...)
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(nc)
	corr, body := readResponse(t, r)
	resp8 := kmsg.NewPtrMetadataResponse()
	resp8.SetVersion(8)
	if corr != 1 || resp8.ReadFrom(body) != nil {
		t.Fatalf("Metadata v8 (header v1): correlation %d", corr)
	}
	corr, body = readResponse(t, r)
	resp12 := kmsg.NewPtrMetadataResponse()
	resp12.SetVersion(12)
	if corr != 2 || body[0] != 0 || resp12.ReadFrom(body[1:]) != nil {
		t.Fatalf("Metadata v12 (header v2): correlation %d, header tags %d", corr, body[0])
	}
	corr, body = readResponse(t, r)
	av := kmsg.NewPtrApiVersionsResponse()
	av.SetVersion(3)
	if corr != 3 || av.ReadFrom(body) != nil || len(av.ApiKeys) == 0 {
		t.Fatalf("ApiVersions v3 (response header v0): correlation %d", corr)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.headers) != 2 || h.headers[0].ClientID != "" || h.headers[1].ClientID != id || h.headers[1].Version != 12 {
		t.Fatalf("headers seen by the handler: %+v", h.headers)
	}
}

// TestOversizedFrameClosesConnection: a frame above socket.request.max.bytes closes
// the connection without reading (or allocating) the claimed size.
func TestOversizedFrameClosesConnection(t *testing.T) {
	_, _, addr := startServer(t)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write([]byte{0x7f, 0xff, 0xff, 0xff, 0, 3, 0, 12})
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after a 2 GiB frame: %v, want EOF", err)
	}
}

// FuzzServeFrame feeds arbitrary frames (everything after the size prefix) through the
// per-connection serve path with a handler that answers every request: decoding,
// dispatch and response encoding must never panic.
func FuzzServeFrame(f *testing.F) {
	id := "fuzz"
	for _, req := range []kmsg.Request{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrFetchRequest(), kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrCreateTopicsRequest()} {
		for _, v := range []int16{4, 9, 12} {
			req.SetVersion(v)
			f.Add(append(header(req.Key(), v, 7, &id, req.IsFlexible(), []byte{0}), req.AppendTo(nil)...))
		}
	}
	s := &Server{Versions: testVersions(), MaxRequestBytes: 1 << 20, NewRequest: kmsg.RequestForKey, Handler: &echoHandler{}}
	s.init()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &conn{s: s, nc: a}
	f.Fuzz(func(t *testing.T, buf []byte) {
		if len(buf) < 8 {
			return // the frame reader closes the connection on these
		}
		s.Handler.(*echoHandler).headers = nil
		r, err := c.serve(context.Background(), buf)
		if out := r.buf; err == nil && out != nil && int(binary.BigEndian.Uint32(out)) != len(out)-4 {
			t.Fatalf("response frame size %d for %d bytes", binary.BigEndian.Uint32(out), len(out)-4)
		}
	})
}

// panicHandler panics on Metadata requests and answers everything else.
type panicHandler struct{ echoHandler }

func (h *panicHandler) Handle(ctx context.Context, req *Request) kmsg.Response {
	if req.Header.Key == 3 {
		panic("a bug in the Metadata handler")
	}
	return h.echoHandler.Handle(ctx, req)
}

// TestHandlerPanicClosesOnlyItsConnection: a handler that panics closes the connection
// of that request, and the server keeps answering its other connections and new ones.
func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	addr := serveUntilCleanup(t, &Server{Versions: testVersions(), MaxRequestBytes: 1 << 20, NewRequest: kmsg.RequestForKey, Handler: &panicHandler{}})
	dial := func() net.Conn {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		nc.SetDeadline(time.Now().Add(30 * time.Second))
		return nc
	}
	id := "client"
	frame := func(req kmsg.Request, corr int32) []byte { // version 2: header v1 for both
		req.SetVersion(2)
		return sized(append(header(req.Key(), 2, corr, &id, false, nil), req.AppendTo(nil)...))
	}
	other := dial()
	bad := dial()
	if _, err := bad.Write(frame(kmsg.NewPtrMetadataRequest(), 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after the handler panicked: %v, want EOF", err)
	}
	for _, nc := range []net.Conn{other, dial()} {
		if _, err := nc.Write(frame(kmsg.NewPtrListGroupsRequest(), 2)); err != nil {
			t.Fatal(err)
		}
		if corr, _ := readResponse(t, nc); corr != 2 {
			t.Fatalf("ListGroups after another connection's panic: correlation %d, want 2", corr)
		}
	}
}
