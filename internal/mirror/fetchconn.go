package mirror

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// maxFetchResponseBytes bounds a response a fetch connection accepts (franz-go's default
// broker read limit): a larger size prefix is a broken or hostile peer.
const maxFetchResponseBytes = 100 << 20

// fetchConn is one fetcher's own connection to one source broker (spec section 3:
// mirror fetchers are separate connections, so mirror.num.replica.fetchers > 1 fetches in
// parallel). It carries Fetch requests only, one at a time, and reads each response into
// a buffer the caller passes back in: the mirror path allocates nothing per response in
// steady state and never decodes records (the record batches of a decoded FetchResponse
// are subslices of that buffer). The mirror's security settings (TLS, SASL PLAIN and
// SCRAM through franz-go's mechanisms) apply as on the admin client. Any I/O error
// closes it; the fetcher dials again on its next round.
type fetchConn struct {
	mu      sync.Mutex // one request at a time: responses are read in order
	conn    net.Conn
	addr    string
	fmt     *kmsg.RequestFormatter
	corr    int32
	wbuf    []byte
	fetchV  int16     // Fetch version both sides speak
	ofleV   int16     // OffsetForLeaderEpoch version both sides speak, −1 none
	saslV   int16     // SaslAuthenticate version both sides speak
	expires time.Time // SASL session end (KIP-368); zero: none
	// throttleUntil: the source asked for no request before then (ThrottleTimeMs,
	// KIP-219: a client waits out the throttle it is told about)
	throttleUntil time.Time
	closed        bool
}

// dialFetchConn connects to a source broker at addr (host:port), runs TLS and SASL as cfg
// says, and negotiates the Fetch version through ApiVersions, all within
// request.timeout.ms. Errors name the step that failed.
func dialFetchConn(ctx context.Context, cfg *mirrorConfig, addr, clientID string) (*fetchConn, error) {
	if cfg.requestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.requestTimeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok && cfg.receiveBuffer > 0 {
		if err := tc.SetReadBuffer(int(cfg.receiveBuffer)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("%s=%d: %w", cfgReceiveBuffer, cfg.receiveBuffer, err)
		}
	}
	tcfg, err := cfg.tlsConfig()
	if err != nil {
		conn.Close()
		return nil, err
	}
	if tcfg != nil {
		tcfg = tcfg.Clone()
		if tcfg.ServerName == "" {
			tcfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(conn, tcfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		conn = tc
	}
	c := &fetchConn{conn: conn, addr: addr, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
	if err := c.handshake(ctx, cfg); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// handshake negotiates versions (ApiVersions v0, which every broker answers) and
// authenticates.
func (c *fetchConn) handshake(ctx context.Context, cfg *mirrorConfig) error {
	timeout := cfg.requestTimeout
	av := kmsg.NewPtrApiVersionsRequest()
	avResp := kmsg.NewPtrApiVersionsResponse()
	if _, err := c.roundTrip(ctx, av, avResp, nil, timeout); err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	if err := kerr.ErrorForCode(avResp.ErrorCode); err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	stable := kversion.Stable()
	ours, _ := stable.LookupMaxKeyVersion(kmsg.Fetch.Int16())
	oursSASL, _ := stable.LookupMaxKeyVersion(kmsg.SASLAuthenticate.Int16())
	oursOFLE, _ := stable.LookupMaxKeyVersion(kmsg.OffsetForLeaderEpoch.Int16())
	c.fetchV, c.ofleV, c.saslV = -1, -1, -1
	for _, k := range avResp.ApiKeys {
		switch k.ApiKey {
		case kmsg.Fetch.Int16():
			c.fetchV = min(k.MaxVersion, ours)
		case kmsg.OffsetForLeaderEpoch.Int16():
			c.ofleV = min(k.MaxVersion, oursOFLE)
		case kmsg.SASLAuthenticate.Int16():
			c.saslV = min(k.MaxVersion, oursSASL, 1) // v2 only adds flexible encoding
		}
	}
	if c.fetchV < 4 {
		return errors.New("the source broker does not serve Fetch v4 or later (record batches of magic 2)")
	}
	if c.fetchV < fetchDivergingEpochVersion && c.ofleV < 0 {
		return errors.New("the source broker serves neither Fetch v12 nor OffsetForLeaderEpoch: source truncation could not be detected")
	}
	mech := cfg.mechanism()
	if mech == nil {
		return nil
	}
	if c.saslV < 0 {
		return errors.New("the source broker does not serve SaslAuthenticate (Kafka 1.0 or later is needed for SASL)")
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = mech.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if _, err := c.roundTrip(ctx, hs, hsResp, nil, timeout); err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return fmt.Errorf("SaslHandshake %s (the source enables %v): %w", mech.Name(), hsResp.SupportedMechanisms, err)
	}
	session, out, err := mech.Authenticate(ctx, c.addr)
	if err != nil {
		return fmt.Errorf("SASL %s: %w", mech.Name(), err)
	}
	start := time.Now()
	var lifetime int64
	for done := false; !done || len(out) > 0; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = c.saslV
		req.SASLAuthBytes = out
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if _, err := c.roundTrip(ctx, req, resp, nil, timeout); err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		if resp.ErrorCode != 0 {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("SaslAuthenticate: %w%s", kerr.ErrorForCode(resp.ErrorCode), msg)
		}
		lifetime, out = resp.SessionLifetimeMillis, nil
		if !done {
			if done, out, err = session.Challenge(resp.SASLAuthBytes); err != nil {
				return fmt.Errorf("SASL %s: %w", mech.Name(), err)
			}
		}
	}
	if lifetime > 0 {
		// re-authentication (KIP-368) is a new connection, opened at 90 % of the lifetime
		c.expires = start.Add(time.Duration(lifetime) * time.Millisecond * 9 / 10)
	}
	return nil
}

// usable reports whether c can take another request (open, SASL session not ending).
func (c *fetchConn) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && (c.expires.IsZero() || time.Now().Before(c.expires))
}

func (c *fetchConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.conn.Close()
	}
}

// fetch sends req at the negotiated version (at most 12 when noIDs: sources addressed
// by topic name) and decodes the answer into resp, reading it into buf (grown when too
// small). It returns the buffer that holds resp's bytes: pass it to the next call once
// resp is no longer used.
func (c *fetchConn) fetch(ctx context.Context, req *kmsg.FetchRequest, noIDs bool, resp *kmsg.FetchResponse,
	buf []byte, timeout time.Duration) ([]byte, error) {
	req.Version = c.fetchV
	if noIDs {
		req.Version = min(req.Version, 12)
	}
	return c.roundTrip(ctx, req, resp, buf, timeout)
}

// roundTrip writes req, reads its response into buf and decodes it into resp. An error
// closes the connection. ctx's end interrupts the wait.
func (c *fetchConn) roundTrip(ctx context.Context, req kmsg.Request, resp kmsg.Response, buf []byte, timeout time.Duration) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return buf, net.ErrClosed
	}
	buf, err := c.exchange(ctx, req, resp, buf, timeout)
	if err != nil {
		c.closed = true
		c.conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
	}
	return buf, err
}

func (c *fetchConn) exchange(ctx context.Context, req kmsg.Request, resp kmsg.Response, buf []byte, timeout time.Duration) ([]byte, error) {
	if d := time.Until(c.throttleUntil); d > 0 {
		select {
		case <-ctx.Done():
			return buf, ctx.Err()
		case <-time.After(d):
		}
	}
	if timeout > 0 {
		if err := c.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
			return buf, err
		}
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Now()) })
	defer stop()
	c.corr++
	c.wbuf = c.fmt.AppendRequest(c.wbuf[:0], req, c.corr)
	if _, err := c.conn.Write(c.wbuf); err != nil {
		return buf, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return buf, err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxFetchResponseBytes {
		return buf, fmt.Errorf("response size %d is outside 4..%d bytes", n, maxFetchResponseBytes)
	}
	if cap(buf) < n {
		buf = make([]byte, n, n+n/4) // headroom: response sizes vary by a batch or so
	}
	buf = buf[:n]
	if _, err := io.ReadFull(c.conn, buf); err != nil {
		return buf, err
	}
	r := kbin.Reader{Src: buf}
	if corr := r.Int32(); corr != c.corr {
		return buf, fmt.Errorf("response correlation ID %d, expected %d", corr, c.corr)
	}
	if req.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		kmsg.SkipTags(&r) // response header v1
	}
	if !r.Ok() {
		return buf, errors.New("truncated response header")
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(r.Src); err != nil {
		return buf, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if tr, ok := resp.(kmsg.ThrottleResponse); ok {
		if ms, after := tr.Throttle(); ms > 0 && after { // before KIP-219 the broker delayed the response itself
			c.throttleUntil = time.Now().Add(time.Duration(ms) * time.Millisecond)
		}
	}
	return buf, nil
}
