// Package wire is kmirror's Kafka protocol layer: framing, request headers v0–v2, the
// version table type (a listener's table, answered to ApiVersions; internal/broker fills
// it from its API registry), and one loop per connection that handles requests in order
// and answers in order, as Apache Kafka's SocketServer/RequestChannel do (Kafka mutes a
// connection while a request is in flight; pipelined requests are still answered in
// order). Bodies are encoded and decoded with franz-go's kmsg.
package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Header is a decoded request header (v0–v2; tagged fields are skipped).
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
}

// Request is one decoded request handed to the Handler.
type Request struct {
	Header Header
	Body   kmsg.Request // version already set
	Remote net.Addr
	// Principal is the connection's authenticated principal in Kafka's form
	// (KafkaPrincipal "User:NAME"); AnonymousPrincipal on a PLAINTEXT listener.
	Principal string
}

// AnonymousPrincipal is Kafka's principal of an unauthenticated connection.
const AnonymousPrincipal = "User:ANONYMOUS"

// Handler serves decoded requests. Handle returns the response body (its version is set
// by the caller), or nil when no response is due (Produce with acks=0). ctx is cancelled
// when the connection closes or the server shuts down.
type Handler interface {
	Handle(ctx context.Context, req *Request) kmsg.Response
}

// ErrServerClosed is the cause (context.Cause) of the end of a connection's context when
// the server shuts down, rather than the connection closing by itself.
var ErrServerClosed = errors.New("wire: server shut down")

type connectionKey struct{}

// FromConnection reports whether ctx is a Handler's context of a request read from a
// client connection: it ends when that connection closes (or, with cause ErrServerClosed,
// when the server shuts down). An in-process request's context is not one.
func FromConnection(ctx context.Context) bool {
	v, _ := ctx.Value(connectionKey{}).(bool)
	return v
}

// Releaser is implemented by a response that borrows pooled buffers or segment file
// ranges (a Fetch response's record batches): Release is called once the response is
// encoded, or for a PartsResponse once its parts are written (or writing them failed).
// A response that wraps a kmsg type may also have Unwrap() kmsg.Response for the
// encoder's size estimate.
type Releaser interface {
	Release()
}

// Server accepts connections and runs the per-connection loops.
type Server struct {
	Versions *Versions
	// MaxRequestBytes is socket.request.max.bytes: a larger frame closes the connection.
	MaxRequestBytes int32
	// NewRequest returns an empty request for key (kmsg.RequestForKey plus kmirror's
	// own mirror RPCs), or nil for an unknown key.
	NewRequest func(key int16) kmsg.Request
	Handler    Handler
	Logger     *slog.Logger
	// Limits bounds the connections and queued request bytes; shared by the Servers of
	// a broker's client listeners, nil for none.
	Limits *Limits
	// Protected: this listener's connections do not count against
	// Limits.MaxConnections and are accepted when it is reached (Kafka's ConnectionQuotas
	// protects the inter-broker listener of a broker with more than one listener).
	Protected bool
	// Security is the listener's TLS and SASL (nil: PLAINTEXT).
	Security *Security

	mu       sync.Mutex
	ln       net.Listener
	conns    map[*conn]struct{}
	closing  bool
	wg       sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelCauseFunc
	initOnce sync.Once
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.conns = map[*conn]struct{}{}
		s.ctx, s.cancel = context.WithCancelCause(context.Background())
		if s.Logger == nil {
			s.Logger = slog.Default()
		}
	})
}

// Serve accepts connections on ln until Shutdown; it returns nil after Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	for {
		if !s.acquireSlot() {
			return nil // shut down while waiting for room under max.connections
		}
		nc, err := ln.Accept()
		if err != nil {
			s.releaseSlot()
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		ip := remoteIP(nc.RemoteAddr())
		if !s.Limits.addIP(ip) {
			s.Logger.Info("closing connection: too many connections from this address", "remote", nc.RemoteAddr(), "max.connections.per.ip", s.Limits.perIPLimit(ip))
			nc.Close()
			s.releaseSlot()
			continue
		}
		c := &conn{s: s, nc: nc, ip: ip}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			s.Limits.removeIP(ip)
			s.releaseSlot()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.run()
	}
}

// acquireSlot waits for room under max.connections (none for a protected listener);
// false when the server shut down first.
func (s *Server) acquireSlot() bool {
	return s.Protected || s.Limits.acquireSlot(s.ctx)
}

// releaseSlot gives back a slot taken by acquireSlot.
func (s *Server) releaseSlot() {
	if !s.Protected {
		s.Limits.releaseSlot()
	}
}

// Shutdown stops accepting, lets each connection finish and answer the request it is
// handling, then closes every connection. It waits until all loops exit or ctx ends.
func (s *Server) Shutdown(ctx context.Context) {
	s.init()
	// Cancelled before the reads are unblocked, so that every connection's context ends
	// with ErrServerClosed as its cause, and long polls return what they have.
	s.cancel(ErrServerClosed)
	s.mu.Lock()
	s.closing = true
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		// Unblock reads; a request being handled still gets its response written.
		c.nc.SetReadDeadline(time.Now())
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
	}
}

// remoteIP is the IP of a connection's remote address (the whole address when it has
// no port).
func remoteIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return h
	}
	return a.String()
}

type conn struct {
	s       *Server
	nc      net.Conn // the accepted socket: deadlines and Close
	rw      net.Conn // what requests are read from and written to: nc, or TLS over it
	ip      string   // remoteIP, counted in s.Limits
	copyBuf []byte   // pread buffer of file parts when sendfile is not used
	// principal is the connection's principal (Request.Principal).
	principal string
	auth      saslState
}

// reply is one response ready to write: the encoded frame in buf, or, for a
// PartsResponse, the frame's size and header in buf followed by parts. rel is
// released once the parts are written (or writing failed).
type reply struct {
	buf   []byte
	parts []Part
	rel   Releaser
}

// write writes r through w and frees what r borrows.
func (c *conn) write(w *bufio.Writer, r reply) error {
	_, err := w.Write(r.buf)
	if r.parts == nil {
		putBuf(r.buf)
		return err
	}
	if err == nil {
		err = c.writeParts(w, r.parts)
	}
	if r.rel != nil {
		r.rel.Release()
	}
	return err
}

// frame is one request frame read, holding size bytes of s.Limits' request pool until
// it is answered.
type frame struct {
	buf  []byte
	size int64
}

func (c *conn) run() {
	s := c.s
	defer func() {
		c.nc.Close()
		s.Limits.removeIP(c.ip)
		s.releaseSlot()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	c.rw, c.principal = c.nc, AnonymousPrincipal
	if sec := s.Security; sec != nil && sec.TLS != nil && !c.tlsHandshake() {
		return
	}
	r := bufio.NewReaderSize(c.rw, 64*1024)
	// Writes larger than the buffer go straight to the socket when it is empty, so
	// multi-MiB Fetch responses are not copied through it.
	w := bufio.NewWriterSize(c.rw, 64*1024)
	if c.saslEnabled() && !c.authenticate(r, w) {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	ctx = context.WithValue(ctx, connectionKey{}, true)
	frames := make(chan frame, 8)
	go func() {
		defer close(frames)
		defer cancel()
		var sizeBuf [4]byte
		for {
			if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
				return
			}
			size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
			if size < 8 || size > s.MaxRequestBytes {
				s.Logger.Info("closing connection: bad request size", "remote", c.nc.RemoteAddr(), "size", size, "socket.request.max.bytes", s.MaxRequestBytes)
				return
			}
			// queued.max.request.bytes: the body is read once the pool has room (Kafka
			// mutes the connection until its MemoryPool can allocate the frame)
			if !s.Limits.reserve(ctx, int64(size)) {
				return
			}
			var buf []byte
			if size >= pooledFrameBytes {
				buf = getBuf(int(size))[:size] // fully overwritten: no zeroing needed
			} else {
				buf = make([]byte, size)
			}
			if _, err := io.ReadFull(r, buf); err != nil {
				s.Limits.release(int64(size))
				return
			}
			select {
			case frames <- frame{buf: buf, size: int64(size)}:
			case <-ctx.Done():
				s.Limits.release(int64(size))
				return
			}
		}
	}()
	defer func() { // frames read but not served give their bytes back
		cancel()
		c.nc.Close() // unblocks the reader, which then closes frames
		for f := range frames {
			s.Limits.release(f.size)
		}
	}()
	for f := range frames {
		key := int16(binary.BigEndian.Uint16(f.buf))
		out, err := c.serve(ctx, f.buf)
		s.Limits.release(f.size) // answered (or none due): its bytes are free again
		if key == produceKey {
			// the records are in the log and the response is encoded: nothing refers
			// to the frame any more. Other requests may leave slices of it in state
			// (group metadata, configs), so only Produce frames are reused.
			putBuf(f.buf)
		}
		if err != nil {
			if out.buf != nil { // a last answer before closing (a failed re-authentication)
				if c.write(w, out) == nil {
					w.Flush()
				}
			}
			s.Logger.Info("closing connection", "remote", c.nc.RemoteAddr(), "reason", err)
			return
		}
		if out.buf == nil {
			continue
		}
		if err := c.write(w, out); err != nil {
			if out.parts != nil {
				s.Logger.Debug("closing connection: writing response", "remote", c.nc.RemoteAddr(), "err", err)
			}
			return
		}
		if len(frames) == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
	w.Flush()
}

// serve decodes one frame, calls the handler and returns the response to write (a nil
// buf for none). An error closes the connection (after writing the response when there
// is one), as Kafka does for undecodable requests, unknown keys, unsupported versions
// (ApiVersions excepted), failed re-authentications and handler panics.
func (c *conn) serve(ctx context.Context, buf []byte) (reply, error) {
	h, rest, err := parseHeader(buf)
	if err != nil {
		return reply{}, err
	}
	if h.Key == 18 { // ApiVersions: answered here, falls back to v0 on unknown versions
		out, err := c.apiVersions(h, rest)
		return reply{buf: out}, err
	}
	if c.saslEnabled() {
		if out, handled, err := c.reauthenticate(h, rest); handled {
			return reply{buf: out}, err
		}
	}
	req, err := c.decodeRequest(h, rest)
	if err != nil {
		return reply{}, err
	}
	flexible := req.IsFlexible()
	resp, err := c.handle(ctx, &Request{Header: h, Body: req, Remote: c.nc.RemoteAddr(), Principal: c.principal})
	if err != nil {
		return reply{}, err
	}
	if resp == nil {
		return reply{}, nil
	}
	resp.SetVersion(h.Version)
	rel, _ := resp.(Releaser)
	if pr, ok := resp.(PartsResponse); ok {
		parts := pr.BodyParts()
		return reply{buf: responseHeader(h.CorrelationID, flexible, parts), parts: parts, rel: rel}, nil
	}
	out := encodeResponse(h.CorrelationID, flexible, resp)
	if rel != nil {
		rel.Release()
	}
	return reply{buf: out}, nil
}

// handle calls the handler, turning a panic into an error that closes this connection
// (logged at ERROR with its stack), so that one request that trips a bug never takes
// down the broker and its other clients (Kafka's KafkaApis.handle catches every
// Throwable).
func (c *conn) handle(ctx context.Context, req *Request) (resp kmsg.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.s.Logger.Error("request handler panicked; closing the connection", "api", kmsg.NameForKey(req.Header.Key),
				"version", req.Header.Version, "remote", req.Remote, "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, fmt.Errorf("%s v%d handler panicked: %v", kmsg.NameForKey(req.Header.Key), req.Header.Version, r)
		}
	}()
	return c.s.Handler.Handle(ctx, req), nil
}

// parseHeader decodes a request header (v1/v2 without its tagged fields) from a frame of
// at least 8 bytes and returns the rest.
func parseHeader(buf []byte) (Header, []byte, error) {
	var h Header
	h.Key = int16(binary.BigEndian.Uint16(buf[0:]))
	h.Version = int16(binary.BigEndian.Uint16(buf[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(buf[4:]))
	rest := buf[8:]
	// Client ID: nullable string with int16 length (header v1 and v2).
	if len(rest) < 2 {
		return h, nil, fmt.Errorf("truncated request header")
	}
	n := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if n > 0 {
		if int(n) > len(rest) {
			return h, nil, fmt.Errorf("truncated client ID")
		}
		h.ClientID = string(rest[:n])
		rest = rest[n:]
	}
	return h, rest, nil
}

// decodeRequest decodes the body of a request with header h (rest is what follows the
// client ID): an unsupported version, an unknown key or an undecodable body is an error.
func (c *conn) decodeRequest(h Header, rest []byte) (kmsg.Request, error) {
	s := c.s
	if !s.Versions.Supported(h.Key, h.Version) {
		name := kmsg.NameForKey(h.Key)
		return nil, fmt.Errorf("unsupported request: key %d (%s) version %d", h.Key, name, h.Version)
	}
	req := s.NewRequest(h.Key)
	if req == nil {
		return nil, fmt.Errorf("unknown API key %d", h.Key)
	}
	req.SetVersion(h.Version)
	if req.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return nil, fmt.Errorf("request header tagged fields: %w", err)
		}
	}
	if err := decode(req, rest); err != nil {
		return nil, fmt.Errorf("decoding %s v%d: %w", kmsg.NameForKey(h.Key), h.Version, err)
	}
	return req, nil
}

// decode runs ReadFrom, turning a panic on garbage input into an error.
func decode(req kmsg.Request, b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed request: %v", r)
		}
	}()
	return req.ReadFrom(b)
}

func (c *conn) apiVersions(h Header, rest []byte) ([]byte, error) {
	s := c.s
	resp := kmsg.NewPtrApiVersionsResponse()
	r, _ := s.Versions.Lookup(18)
	version := h.Version
	if h.Version > r.Max || h.Version < 0 {
		// Kafka answers with v0 and UNSUPPORTED_VERSION so the client can pick a version.
		version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
	} else {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(h.Version)
		if req.IsFlexible() {
			var err error
			if rest, err = skipTags(rest); err != nil {
				return nil, err
			}
		}
		if err := decode(req, rest); err != nil {
			return nil, err
		}
	}
	resp.SetVersion(version)
	resp.ApiKeys = s.Versions.APIKeys()
	// ApiVersions responses always use response header v0.
	return encodeResponse(h.CorrelationID, false, resp), nil
}

// bufPool holds response buffers (*[]byte) for reuse once written: a Fetch response
// is as large as the records it carries, and growing a fresh buffer by appending
// would copy it several times over.
var bufPool sync.Pool

// produceKey is the API key of Produce, whose request frames are reused.
const produceKey = 0

// pooledFrameBytes is the smallest request frame read into a pooled buffer (bytes);
// smaller ones are allocated, so that they do not take large buffers from the pool.
const pooledFrameBytes = 64 * 1024

// getBuf returns an empty buffer with capacity of at least n bytes.
func getBuf(n int) []byte {
	if p, ok := bufPool.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

// putBuf returns a written response buffer, or a served Produce frame, to the pool; small
// ones are dropped.
func putBuf(b []byte) {
	if cap(b) < pooledFrameBytes {
		return
	}
	bufPool.Put(&b)
}

// sizeHint estimates the encoded size of resp: exact enough for Fetch responses, whose
// record batches dominate, so that AppendTo does not regrow the buffer.
func sizeHint(resp kmsg.Response) int {
	if u, ok := resp.(interface{ Unwrap() kmsg.Response }); ok {
		resp = u.Unwrap()
	}
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 256
	}
	n := 64
	for i := range fr.Topics {
		t := &fr.Topics[i]
		n += 32 + len(t.Topic)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			n += 64 + 16*len(p.AbortedTransactions) + len(p.RecordBatches)
		}
	}
	return n
}

func encodeResponse(correlationID int32, flexibleHeader bool, resp kmsg.Response) []byte {
	out := getBuf(sizeHint(resp))[:8]
	binary.BigEndian.PutUint32(out[4:], uint32(correlationID))
	if flexibleHeader && resp.Key() != 18 {
		out = append(out, 0) // no tagged fields
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out[0:], uint32(len(out)-4))
	return out
}

// responseHeader returns the frame size and response header of a response whose body
// is parts (header v1's empty tagged-field section when flexibleHeader).
func responseHeader(correlationID int32, flexibleHeader bool, parts []Part) []byte {
	n := int64(4)
	if flexibleHeader {
		n++
	}
	for i := range parts {
		n += parts[i].size()
	}
	out := make([]byte, 8, 9)
	binary.BigEndian.PutUint32(out, uint32(n))
	binary.BigEndian.PutUint32(out[4:], uint32(correlationID))
	if flexibleHeader {
		out = append(out, 0)
	}
	return out
}

// skipTags skips a tagged-field section (uvarint count, then tag, size, bytes).
func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[l:]
	for i := uint64(0); i < n; i++ {
		if _, l = binary.Uvarint(b); l <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, errors.New("bad tag size")
		}
		b = b[l+int(size):]
	}
	return b, nil
}
