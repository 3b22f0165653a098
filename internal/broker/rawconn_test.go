package broker_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn is a plain TCP connection speaking the Kafka framing by hand, for requests
// a real client would never send.
type rawConn struct {
	t    *testing.T
	nc   net.Conn
	r    *bufio.Reader
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// frame encodes a request frame: size, header v1 or v2 (client ID "raw"), body.
func frame(key, version int16, corr int32, flexibleHeader bool, body []byte) []byte {
	out := make([]byte, 4, 64+len(body))
	out = binary.BigEndian.AppendUint16(out, uint16(key))
	out = binary.BigEndian.AppendUint16(out, uint16(version))
	out = binary.BigEndian.AppendUint32(out, uint32(corr))
	out = binary.BigEndian.AppendUint16(out, 3)
	out = append(out, "raw"...)
	if flexibleHeader {
		out = append(out, 0)
	}
	out = append(out, body...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// write sends bytes as they are.
func (c *rawConn) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// readFrame reads one response frame and returns its correlation ID and the rest.
func (c *rawConn) readFrame() (int32, []byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return 0, nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// request sends req at its set version and decodes the response.
func (c *rawConn) request(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	c.corr++
	c.write(frame(req.Key(), req.GetVersion(), c.corr, req.IsFlexible(), req.AppendTo(nil)))
	corr, body, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("%s v%d: reading the response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if corr != c.corr {
		c.t.Fatalf("correlation ID %d, want %d", corr, c.corr)
	}
	resp := req.ResponseKind()
	if req.IsFlexible() && req.Key() != 18 {
		body = body[1:] // response header tagged fields (none are sent)
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decoding %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// expectClosed asserts that the broker closes the connection without answering.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	if _, _, err := c.readFrame(); err == nil {
		c.t.Fatal("the broker answered; want the connection closed")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.t.Fatal("the connection stayed open; want it closed")
	}
}
