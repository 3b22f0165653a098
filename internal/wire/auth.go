package wire

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Security is a listener's security protocol: TLS for SSL and SASL_SSL, SASL for
// SASL_PLAINTEXT and SASL_SSL (Kafka's SslTransportLayer and SaslServerAuthenticator).
type Security struct {
	// TLS is the server configuration of a TLS listener; nil for plaintext.
	TLS *tls.Config
	// CertPrincipal maps a verified TLS client certificate to the connection's principal
	// ("User:NAME"); an error refuses the connection. Without a client certificate the
	// principal is AnonymousPrincipal.
	CertPrincipal func(*x509.Certificate) (string, error)
	// Mechanisms are sasl.enabled.mechanisms; empty on a listener without SASL.
	Mechanisms []string
	// NewExchange starts the server side of one SASL exchange of an enabled mechanism.
	NewExchange func(mechanism string) SASLExchange
	// FailedAuthenticationDelay (connection.failed.authentication.delay.ms) delays the
	// response to a failed authentication, before the connection is closed.
	FailedAuthenticationDelay time.Duration
	// MaxReauth (connections.max.reauth.ms) is the session lifetime given to SaslAuthenticate
	// v1+ clients; 0 for sessions that never expire. A connection whose session expired
	// without re-authenticating (KIP-368) is closed on its next request.
	MaxReauth time.Duration
}

// SASLExchange is the server side of one SASL authentication.
type SASLExchange interface {
	// Next consumes the client's token and returns the server's challenge and whether the
	// client is authenticated; an error fails the authentication with its text as the
	// error message.
	Next(token []byte) (challenge []byte, done bool, err error)
	// Username is the authenticated user once Next reported done.
	Username() string
}

// saslState is a connection's SASL state (touched only by its serving goroutine).
type saslState struct {
	mechanism string
	exchange  SASLExchange // the exchange in progress, nil between exchanges
	rawTokens bool         // after a v0 SaslHandshake: tokens come without Kafka headers
	done      bool         // authenticated at least once
	expiry    time.Time    // zero: the session never expires
}

// Kafka API keys the authenticator answers itself.
const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
	apiVersionsKey      = 18
)

// saslMaxReceiveBytes is Kafka's sasl.server.max.receive.size default: the largest frame
// accepted before authentication.
const saslMaxReceiveBytes = 524288

// tlsHandshakeTimeout bounds a TLS handshake; a client that stalls in it is closed.
const tlsHandshakeTimeout = 30 * time.Second

func (c *conn) saslEnabled() bool { return c.s.Security != nil && len(c.s.Security.Mechanisms) > 0 }

// tlsHandshake runs the server side of TLS on the accepted socket and sets the principal
// from a client certificate. False closes the connection (logged).
func (c *conn) tlsHandshake() bool {
	s := c.s
	tc := tls.Server(c.nc, s.Security.TLS)
	c.nc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	if err := tc.HandshakeContext(s.ctx); err != nil {
		s.Logger.Info("closing connection: TLS handshake failed", "remote", c.nc.RemoteAddr(), "err", err)
		return false
	}
	c.nc.SetDeadline(time.Time{})
	if s.ctx.Err() != nil { // shut down meanwhile: the deadline it set was just cleared
		return false
	}
	c.rw = tc
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 && s.Security.CertPrincipal != nil {
		p, err := s.Security.CertPrincipal(certs[0])
		if err != nil {
			s.Logger.Info("closing connection: client certificate", "remote", c.nc.RemoteAddr(), "err", err)
			return false
		}
		c.principal = p
	}
	return true
}

// authenticate runs the SASL exchange that must complete before any other request, as
// Kafka's SaslServerAuthenticator: ApiVersions, SaslHandshake, then SaslAuthenticate
// requests (or raw tokens after a v0 SaslHandshake). Any other request, an unknown
// mechanism or a failed authentication closes the connection (a failure after the
// failed-authentication delay and its error response). True once authenticated.
func (c *conn) authenticate(r *bufio.Reader, w *bufio.Writer) bool {
	s := c.s
	for !c.auth.done {
		buf, err := readAuthFrame(r, c.auth.rawTokens)
		if err != nil {
			if err != io.EOF {
				s.Logger.Info("closing connection during SASL authentication", "remote", c.nc.RemoteAddr(), "reason", err)
			}
			return false
		}
		var out []byte
		if c.auth.rawTokens {
			out, err = c.rawToken(buf)
		} else {
			out, err = c.authRequest(buf)
		}
		if out != nil {
			if _, werr := w.Write(out); werr != nil {
				return false
			}
			if werr := w.Flush(); werr != nil {
				return false
			}
		}
		if err != nil {
			s.Logger.Info("closing connection: SASL authentication", "remote", c.nc.RemoteAddr(), "reason", err)
			return false
		}
	}
	return true
}

// readAuthFrame reads one size-prefixed frame of the SASL exchange (a request, or a raw
// token, which may be empty).
func readAuthFrame(r *bufio.Reader, raw bool) ([]byte, error) {
	var sizeBuf [4]byte
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	minSize := int32(8)
	if raw {
		minSize = 0
	}
	if size < minSize || size > saslMaxReceiveBytes {
		return nil, fmt.Errorf("invalid frame size %d during SASL authentication (sasl.server.max.receive.size %d)", size, saslMaxReceiveBytes)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// authRequest answers one request read before authentication completes.
func (c *conn) authRequest(buf []byte) ([]byte, error) {
	h, rest, err := parseHeader(buf)
	if err != nil {
		return nil, err
	}
	switch h.Key {
	case apiVersionsKey:
		return c.apiVersions(h, rest)
	case saslHandshakeKey:
		return c.saslHandshake(h, rest)
	case saslAuthenticateKey:
		if c.auth.exchange == nil {
			return nil, fmt.Errorf("unexpected SaslAuthenticate request before SaslHandshake")
		}
		return c.saslAuthenticate(h, rest)
	}
	return nil, fmt.Errorf("unexpected %s request during SASL authentication", kmsg.NameForKey(h.Key))
}

// reauthenticate serves SaslHandshake and SaslAuthenticate after authentication (KIP-368
// re-authentication), and closes a connection whose session expired. handled is false
// for the other requests of a live session.
func (c *conn) reauthenticate(h Header, rest []byte) (out []byte, handled bool, err error) {
	switch h.Key {
	case saslHandshakeKey:
		if h.Version == 0 {
			return nil, true, fmt.Errorf("SaslHandshake v0 cannot re-authenticate")
		}
		out, err = c.saslHandshake(h, rest)
		return out, true, err
	case saslAuthenticateKey:
		if c.auth.exchange == nil {
			return nil, true, fmt.Errorf("unexpected SaslAuthenticate request before SaslHandshake")
		}
		out, err = c.saslAuthenticate(h, rest)
		return out, true, err
	}
	if !c.auth.expiry.IsZero() && time.Now().After(c.auth.expiry) {
		return nil, true, fmt.Errorf("SASL session expired (connections.max.reauth.ms) without re-authentication")
	}
	return nil, false, nil
}

// saslHandshake picks the mechanism. An unknown mechanism is answered with
// UNSUPPORTED_SASL_MECHANISM and the enabled ones, then the connection is closed.
func (c *conn) saslHandshake(h Header, rest []byte) ([]byte, error) {
	sec := c.s.Security
	body, err := c.decodeRequest(h, rest)
	if err != nil {
		return nil, err
	}
	req := body.(*kmsg.SASLHandshakeRequest)
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SetVersion(h.Version)
	resp.SupportedMechanisms = sec.Mechanisms
	mech := strings.ToUpper(req.Mechanism)
	if !slices.Contains(sec.Mechanisms, mech) || (c.auth.done && mech != c.auth.mechanism) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.failureDelay()
		return encodeResponse(h.CorrelationID, false, resp), fmt.Errorf("unsupported SASL mechanism %q (sasl.enabled.mechanisms %s)", req.Mechanism, strings.Join(sec.Mechanisms, ","))
	}
	c.auth.mechanism = mech
	c.auth.exchange = sec.NewExchange(mech)
	c.auth.rawTokens = h.Version == 0
	return encodeResponse(h.CorrelationID, false, resp), nil
}

// saslAuthenticate runs one step of the exchange. A failure is answered, after the
// failed-authentication delay, with SASL_AUTHENTICATION_FAILED and closes the connection.
func (c *conn) saslAuthenticate(h Header, rest []byte) ([]byte, error) {
	body, err := c.decodeRequest(h, rest)
	if err != nil {
		return nil, err
	}
	req := body.(*kmsg.SASLAuthenticateRequest)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(h.Version)
	flexible := req.IsFlexible()
	challenge, done, err := c.auth.exchange.Next(req.SASLAuthBytes)
	if err == nil && done {
		err = c.authenticated(c.auth.exchange.Username())
	}
	if err != nil {
		c.auth.exchange = nil
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		c.failureDelay()
		return encodeResponse(h.CorrelationID, flexible, resp), err
	}
	resp.SASLAuthBytes = challenge
	if done && h.Version >= 1 && c.s.Security.MaxReauth > 0 {
		resp.SessionLifetimeMillis = c.s.Security.MaxReauth.Milliseconds()
	}
	return encodeResponse(h.CorrelationID, flexible, resp), nil
}

// rawToken runs one step of the exchange on a raw token (after a v0 SaslHandshake) and
// returns the size-prefixed challenge. Kafka closes the connection on a failure without
// a response.
func (c *conn) rawToken(token []byte) ([]byte, error) {
	challenge, done, err := c.auth.exchange.Next(token)
	if err == nil && done {
		err = c.authenticated(c.auth.exchange.Username())
	}
	if err != nil {
		c.failureDelay()
		return nil, err
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(len(challenge)))
	return append(out, challenge...), nil
}

// authenticated records a completed exchange of user. A re-authentication must keep the
// principal (Kafka: "Cannot change principals during re-authentication").
func (c *conn) authenticated(user string) error {
	p := "User:" + user
	if c.auth.done && p != c.principal {
		return fmt.Errorf("cannot change principals during re-authentication from %s to %s", c.principal, p)
	}
	c.principal = p
	c.auth.done = true
	c.auth.exchange = nil
	c.auth.rawTokens = false
	if d := c.s.Security.MaxReauth; d > 0 {
		c.auth.expiry = time.Now().Add(d)
	}
	return nil
}

// failureDelay waits connection.failed.authentication.delay.ms (less when the server
// shuts down), so that a client cannot retry passwords at full speed.
func (c *conn) failureDelay() {
	d := c.s.Security.FailedAuthenticationDelay
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.s.ctx.Done():
	}
}
