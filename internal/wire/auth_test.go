package wire_test

import (
	"context"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kmirror/kmirror/internal/security"
	"github.com/kmirror/kmirror/internal/security/securitytest"
	"github.com/kmirror/kmirror/internal/wire"
)

// principalHandler answers every request with its empty response kind and records the
// principals requests came with.
type principalHandler struct {
	mu         sync.Mutex
	principals []string
}

func (h *principalHandler) Handle(_ context.Context, req *wire.Request) kmsg.Response {
	h.mu.Lock()
	h.principals = append(h.principals, req.Principal)
	h.mu.Unlock()
	return req.Body.ResponseKind()
}

func (h *principalHandler) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.principals) == 0 {
		return ""
	}
	return h.principals[len(h.principals)-1]
}

func serve(t testing.TB, sec *wire.Security) (*principalHandler, string) {
	t.Helper()
	ranges := map[int16]wire.VersionRange{}
	for _, k := range []int16{3, 17, 18, 36} {
		ranges[k] = wire.VersionRange{Min: 0, Max: kmsg.RequestForKey(k).MaxVersion()}
	}
	h := &principalHandler{}
	s := &wire.Server{Versions: wire.NewVersions(ranges), MaxRequestBytes: 1 << 20, NewRequest: kmsg.RequestForKey, Handler: h, Security: sec,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
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
	return h, ln.Addr().String()
}

func metadataAs(t *testing.T, addr string, opts ...kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = cl.Request(context.Background(), kmsg.NewPtrMetadataRequest())
	return err
}

// TestTLSClientCertificatePrincipal: the principal of a TLS connection is the client
// certificate's DN mapped by ssl.principal.mapping.rules (the first matching rule; DEFAULT
// keeps the whole RFC 2253 DN), User:ANONYMOUS without a certificate. A truncated TLS
// handshake is closed and the listener keeps serving.
func TestTLSClientCertificatePrincipal(t *testing.T) {
	ca := securitytest.NewCA(t, "ca")
	server := ca.Server(t)
	get := func(k string) string {
		return map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": server.KeystorePEM,
			"ssl.truststore.type": "PEM", "ssl.truststore.location": ca.PEMFile, "ssl.client.auth": "requested"}[k]
	}
	tcfg, err := security.ServerTLSConfig(get)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := security.NewPrincipalMapper(`RULE:^CN=([^,]+),O=kmirror$/$1/L, DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	h, addr := serve(t, &wire.Security{TLS: tcfg, CertPrincipal: mapper.CertPrincipal})
	for _, tc := range []struct {
		leaf *securitytest.Leaf
		want string
	}{
		{ca.Client(t, pkix.Name{CommonName: "Alice", Organization: []string{"kmirror"}}), "User:alice"},
		{ca.Client(t, pkix.Name{CommonName: "bob", Organization: []string{"other"}, Country: []string{"DE"}}), "User:CN=bob,O=other,C=DE"},
		{nil, wire.AnonymousPrincipal},
	} {
		if err := metadataAs(t, addr, kgo.DialTLSConfig(ca.ClientTLS(tc.leaf))); err != nil {
			t.Fatal(err)
		}
		if got := h.last(); got != tc.want {
			t.Fatalf("principal %q, want %q", got, tc.want)
		}
	}

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00}) // the start of a ClientHello
	c.(*net.TCPConn).CloseWrite()
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("a truncated TLS handshake: %v", err)
	}
	if err := metadataAs(t, addr, kgo.DialTLSConfig(ca.ClientTLS(nil))); err != nil {
		t.Fatalf("a client after a truncated handshake: %v", err)
	}
}

// body encodes req at version.
func body(req kmsg.Request, version int16) []byte {
	req.SetVersion(version)
	return req.AppendTo(nil)
}

// frame writes one request frame (header v1, client ID "t") with body.
func frame(key, version int16, corr int32, body []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 't')
	b = append(b, body...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func readFrame(t testing.TB, c net.Conn) []byte {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// closed checks that the server closes c without answering.
func closed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	var b [1]byte
	if n, err := c.Read(b[:]); err == nil || n > 0 {
		t.Fatalf("%s: the connection is still open (read %d bytes, %v)", what, n, err)
	}
}

// TestSASLBadInput: before authentication completes, a SaslAuthenticate without a
// handshake, another request, random bytes and a truncated frame each close the
// connection (an unknown mechanism after its UNSUPPORTED_SASL_MECHANISM answer), while a
// v0 handshake with a raw PLAIN token authenticates, and a franz-go client keeps working.
func TestSASLBadInput(t *testing.T) {
	users := map[string]string{"alice": "alice-secret"}
	h, addr := serve(t, &wire.Security{
		Mechanisms:  []string{"PLAIN"},
		NewExchange: func(string) wire.SASLExchange { return security.NewPlainExchange(users) },
	})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	authReq := kmsg.NewPtrSASLAuthenticateRequest()
	authReq.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
	hs := func(mech string) []byte {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Mechanism = mech
		return r.AppendTo(nil)
	}

	c := dial()
	c.Write(frame(36, 1, 1, body(authReq, 1)))
	closed(t, c, "SaslAuthenticate before SaslHandshake")

	c = dial()
	c.Write(frame(3, 4, 1, body(kmsg.NewPtrMetadataRequest(), 4)))
	closed(t, c, "Metadata before authentication")

	c = dial()
	c.Write([]byte{0, 0, 0, 12, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8})
	closed(t, c, "random bytes")

	c = dial()
	c.Write([]byte{0, 0, 0, 40, 0, 17, 0, 1})
	c.(*net.TCPConn).CloseWrite()
	closed(t, c, "a truncated frame")

	c = dial()
	c.Write(frame(17, 1, 1, hs("GSSAPI")))
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SetVersion(1)
	if err := resp.ReadFrom(readFrame(t, c)[4:]); err != nil || resp.ErrorCode != 33 || len(resp.SupportedMechanisms) != 1 {
		t.Fatalf("unknown mechanism: %v %+v, want UNSUPPORTED_SASL_MECHANISM with [PLAIN]", err, resp)
	}
	closed(t, c, "after an unknown mechanism")

	// SaslHandshake v0, then the raw PLAIN token and an empty raw challenge.
	c = dial()
	c.Write(frame(17, 0, 1, hs("PLAIN")))
	readFrame(t, c)
	token := []byte("\x00alice\x00alice-secret")
	c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...))
	if b := readFrame(t, c); len(b) != 0 {
		t.Fatalf("raw PLAIN challenge %q, want empty", b)
	}
	c.Write(frame(3, 4, 2, body(kmsg.NewPtrMetadataRequest(), 4)))
	readFrame(t, c)
	if got := h.last(); got != "User:alice" {
		t.Fatalf("principal after a v0 handshake %q, want User:alice", got)
	}

	if err := metadataAs(t, addr, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())); err != nil {
		t.Fatalf("a good client after the bad input: %v", err)
	}
}

// TestSASLReauthentication (KIP-368): a SaslAuthenticate v1 response carries
// connections.max.reauth.ms as the session lifetime; the client re-authenticates on the
// same connection as the same user; re-authenticating as another user closes the
// connection, and so does a request after the session expired.
func TestSASLReauthentication(t *testing.T) {
	users := map[string]string{"alice": "alice-secret", "bob": "bob-secret"}
	newServer := func(lifetime time.Duration) string {
		_, addr := serve(t, &wire.Security{
			Mechanisms:  []string{"PLAIN"},
			NewExchange: func(string) wire.SASLExchange { return security.NewPlainExchange(users) },
			MaxReauth:   lifetime,
		})
		return addr
	}
	login := func(c net.Conn, user string) *kmsg.SASLAuthenticateResponse {
		t.Helper()
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Mechanism = "PLAIN"
		c.Write(frame(17, 1, 1, body(r, 1)))
		readFrame(t, c)
		a := kmsg.NewPtrSASLAuthenticateRequest()
		a.SASLAuthBytes = []byte("\x00" + user + "\x00" + users[user])
		c.Write(frame(36, 1, 2, body(a, 1)))
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.SetVersion(1)
		if err := resp.ReadFrom(readFrame(t, c)[4:]); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("authenticating %s: %v %+v", user, err, resp)
		}
		return resp
	}
	metadataOK := func(c net.Conn) {
		t.Helper()
		c.Write(frame(3, 4, 3, body(kmsg.NewPtrMetadataRequest(), 4)))
		readFrame(t, c)
	}

	addr := newServer(time.Hour)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if resp := login(c, "alice"); resp.SessionLifetimeMillis != time.Hour.Milliseconds() {
		t.Fatalf("session lifetime %d ms, want %d", resp.SessionLifetimeMillis, time.Hour.Milliseconds())
	}
	metadataOK(c)
	login(c, "alice") // re-authentication on the live connection
	metadataOK(c)
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Mechanism = "PLAIN"
	c.Write(frame(17, 1, 4, body(r, 1)))
	readFrame(t, c)
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.SASLAuthBytes = []byte("\x00bob\x00bob-secret")
	c.Write(frame(36, 1, 5, body(a, 1)))
	readFrame(t, c) // the failure response
	closed(t, c, "re-authentication as another principal")

	short, err := net.Dial("tcp", newServer(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	login(short, "alice")
	time.Sleep(20 * time.Millisecond) // well past the 1 ms session
	short.Write(frame(3, 4, 3, body(kmsg.NewPtrMetadataRequest(), 4)))
	closed(t, short, "a request after the session expired")
}
