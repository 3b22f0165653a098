package wire

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// partsResp is a Metadata response kind whose body is given as parts.
type partsResp struct {
	kmsg.Response
	parts    []Part
	released chan struct{}
}

func (p *partsResp) BodyParts() []Part { return p.parts }
func (p *partsResp) Release()          { close(p.released) }

// partsHandler answers every request with a partsResp over parts(), sent on resps.
type partsHandler struct {
	parts func() []Part
	resps chan *partsResp
}

func (h *partsHandler) Handle(_ context.Context, req *Request) kmsg.Response {
	r := &partsResp{Response: req.Body.ResponseKind(), parts: h.parts(), released: make(chan struct{})}
	h.resps <- r
	return r
}

// tempFile writes n random bytes to a new file, whose shared offset is left at 7.
func tempFile(t *testing.T, n int) (*os.File, []byte) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "segment"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	data := make([]byte, n)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(7, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	return f, data
}

// testParts is a body mixing bytes and file ranges, one larger than any socket
// buffer (so sendfile meets EAGAIN and short writes), and what it must put on the wire.
func testParts(f *os.File, data []byte) ([]Part, []byte) {
	parts := []Part{
		{Bytes: []byte("head")},
		{File: f, Pos: 3, Len: int64(len(data)) - 10},
		{Bytes: []byte("middle")},
		{File: f, Pos: 0, Len: 1},
		{File: f, Pos: 5, Len: 0},
		{File: f, Pos: int64(len(data)) - 100, Len: 100},
		{Bytes: []byte("tail")},
	}
	var want []byte
	for _, p := range parts {
		if p.File == nil {
			want = append(want, p.Bytes...)
		} else {
			want = append(want, data[p.Pos:p.Pos+p.Len]...)
		}
	}
	return parts, want
}

// servePartsHandler serves h on a loopback listener until the test ends and returns a
// connection to it.
func servePartsHandler(t *testing.T, h *partsHandler) net.Conn {
	t.Helper()
	s := &Server{Versions: testVersions(), MaxRequestBytes: 1 << 20, NewRequest: kmsg.RequestForKey, Handler: h}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// TestPartsResponseOverTCP: responses made of parts are framed and written in order
// over TCP (sendfile on Linux), pipelined with ordinary ones; the file's shared offset
// is not used; each response is released after it is written.
func TestPartsResponseOverTCP(t *testing.T) {
	f, data := tempFile(t, 6<<20)
	parts, want := testParts(f, data)
	h := &partsHandler{parts: func() []Part { return parts }, resps: make(chan *partsResp, 4)}
	nc := servePartsHandler(t, h)
	defer nc.Close()
	id := "parts"
	md8 := kmsg.NewPtrMetadataRequest()
	md8.SetVersion(8)
	md12 := kmsg.NewPtrMetadataRequest()
	md12.SetVersion(12)
	var out []byte
	out = append(out, sized(append(header(3, 8, 1, &id, false, nil), md8.AppendTo(nil)...))...)
	out = append(out, sized(append(header(3, 12, 2, &id, true, []byte{0}), md12.AppendTo(nil)...))...)
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(nc)
	corr, body := readResponse(t, r)
	if corr != 1 || !bytes.Equal(body, want) {
		t.Fatalf("first response: correlation %d, %d bytes, want %d bytes as sent", corr, len(body), len(want))
	}
	corr, body = readResponse(t, r)
	if corr != 2 || len(body) == 0 || body[0] != 0 || !bytes.Equal(body[1:], want) {
		t.Fatalf("second response (header v1): correlation %d, %d bytes", corr, len(body))
	}
	for range 2 {
		<-(<-h.resps).released
	}
	if off, _ := f.Seek(0, io.SeekCurrent); off != 7 {
		t.Fatalf("file offset moved to %d", off)
	}
}

// TestPartsResponseFallback: on a connection that is not TCP (net.Pipe) file parts are
// copied with pread.
func TestPartsResponseFallback(t *testing.T) {
	f, data := tempFile(t, 1<<20)
	parts, want := testParts(f, data)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &conn{s: &Server{}, nc: a}
	rel := &partsResp{released: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(a, 64<<10)
		err := c.write(w, reply{buf: responseHeader(9, false, parts), parts: parts, rel: rel})
		if err == nil {
			err = w.Flush()
		}
		done <- err
	}()
	corr, body := readResponse(t, b)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-rel.released
	if corr != 9 || !bytes.Equal(body, want) {
		t.Fatalf("correlation %d, %d bytes, want %d as sent", corr, len(body), len(want))
	}
	if off, _ := f.Seek(0, io.SeekCurrent); off != 7 {
		t.Fatalf("file offset moved to %d", off)
	}
}

// TestPartsResponseReleasedOnClose: a response whose client goes away while it is
// being written is still released, and the connection is closed.
func TestPartsResponseReleasedOnClose(t *testing.T) {
	f, data := tempFile(t, 32<<20)
	parts := []Part{{Bytes: []byte("x")}, {File: f, Pos: 0, Len: int64(len(data))}}
	h := &partsHandler{parts: func() []Part { return parts }, resps: make(chan *partsResp, 1)}
	nc := servePartsHandler(t, h)
	id := "gone"
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(8)
	if _, err := nc.Write(sized(append(header(3, 8, 1, &id, false, nil), md.AppendTo(nil)...))); err != nil {
		t.Fatal(err)
	}
	resp := <-h.resps
	// Read a little, then go away with most of the 32 MiB unsent.
	if _, err := io.ReadFull(nc, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	<-resp.released
}
