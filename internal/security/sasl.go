package security

import (
	"bytes"
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"

	"github.com/xdg-go/scram"
)

// SASL mechanism names (Kafka's).
const (
	MechanismPlain    = "PLAIN"
	MechanismScram256 = "SCRAM-SHA-256"
	MechanismScram512 = "SCRAM-SHA-512"
)

// ErrAuthentication is the cause of every failed SASL exchange; the message sent to the
// client is the error's text, which never holds a password.
//
//lint:ignore ST1005 Kafka's text, which clients show
var ErrAuthentication = errors.New("Authentication failed")

// Exchange is the server side of one SASL authentication (Kafka's SaslServer).
type Exchange interface {
	// Next consumes the client's next token and returns the server's challenge (possibly
	// empty) and whether the client is authenticated. An error wraps ErrAuthentication.
	Next(token []byte) (challenge []byte, done bool, err error)
	// Username is the authenticated user once Next reported done.
	Username() string
}

// plainExchange is PLAIN (RFC 4616) against PlainLoginModule's user_NAME options, as
// Kafka's PlainSaslServer: authzid\0authcid\0password, the authzid empty or the authcid.
type plainExchange struct {
	users map[string]string
	user  string
}

// NewPlainExchange starts a PLAIN exchange against users (user name → password).
func NewPlainExchange(users map[string]string) Exchange { return &plainExchange{users: users} }

func (e *plainExchange) Next(token []byte) ([]byte, bool, error) {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return nil, false, fmt.Errorf("%w: Invalid SASL/PLAIN response: expected 3 tokens, got %d", ErrAuthentication, len(parts))
	}
	authz, user, pass := string(parts[0]), string(parts[1]), parts[2]
	if user == "" {
		return nil, false, fmt.Errorf("%w: username not specified", ErrAuthentication)
	}
	if len(pass) == 0 {
		return nil, false, fmt.Errorf("%w: password not specified", ErrAuthentication)
	}
	want, ok := e.users[user]
	if !ok || subtle.ConstantTimeCompare([]byte(want), pass) != 1 {
		return nil, false, fmt.Errorf("%w: Invalid username or password", ErrAuthentication)
	}
	if authz != "" && authz != user {
		return nil, false, fmt.Errorf("%w: Client requested an authorization id that is different from username", ErrAuthentication)
	}
	e.user = user
	return nil, true, nil
}

func (e *plainExchange) Username() string { return e.user }

// ScramLookup returns the stored SCRAM credential of user for mechanism, false when the
// user has none.
type ScramLookup func(mechanism, user string) (ScramCredential, bool)

// scramExchange is SCRAM (RFC 5802/7677) against stored credentials: xdg-go/scram reads
// the client-first message and writes the server-first one; the client-final message is
// verified here, because Kafka's ScramSaslServer accepts a client nonce that only ends
// with the server's nonce (librdkafka sends its own nonce again in front of it), where
// xdg-go/scram requires the exact nonce.
type scramExchange struct {
	hash      scram.HashGeneratorFcn
	mechanism string
	conv      *scram.ServerConversation
	cred      ScramCredential
	step      int
	clientGS2 string // the client-first message's gs2 header, "n,,"
	c1Bare    string // the client-first message without its gs2 header
	s1        string // the server-first message
	nonce     string // the server-first message's nonce
}

// NewScramExchange starts a SCRAM-SHA-256 or SCRAM-SHA-512 exchange whose credentials
// come from lookup. False for another mechanism.
func NewScramExchange(mechanism string, lookup ScramLookup) (Exchange, bool) {
	h, ok := scramHash(mechanism)
	if !ok {
		return nil, false
	}
	e := &scramExchange{hash: h, mechanism: strings.ToUpper(mechanism)}
	srv, err := h.NewServer(func(user string) (scram.StoredCredentials, error) {
		c, ok := lookup(mechanism, user)
		if !ok {
			return scram.StoredCredentials{}, fmt.Errorf("unknown user")
		}
		e.cred = c
		return scram.StoredCredentials{
			KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
			StoredKey:  c.StoredKey, ServerKey: c.ServerKey,
		}, nil
	})
	if err != nil { // only for a nil hash
		return nil, false
	}
	e.conv = srv.NewConversation()
	return e, true
}

func (e *scramExchange) fail() error {
	return fmt.Errorf("%w during authentication due to invalid credentials with SASL mechanism %s", ErrAuthentication, e.mechanism)
}

func (e *scramExchange) Next(token []byte) ([]byte, bool, error) {
	e.step++
	switch e.step {
	case 1:
		c1 := string(token)
		out, err := e.conv.Step(c1)
		if err != nil {
			return nil, false, e.fail()
		}
		// gs2 header: flag "," [authzid] ","; xdg-go/scram has parsed and checked it.
		i := strings.IndexByte(c1, ',')
		j := strings.IndexByte(c1[i+1:], ',')
		e.clientGS2, e.c1Bare, e.s1 = c1[:i+j+2], c1[i+j+2:], out
		nonce, _, _ := strings.Cut(strings.TrimPrefix(out, "r="), ",")
		e.nonce = nonce
		return []byte(out), false, nil
	case 2:
		return e.final(string(token))
	}
	return nil, false, e.fail()
}

// final verifies the client-final message c=…,r=…[,extensions],p=… and returns the
// server-final message v=….
func (e *scramExchange) final(c2 string) ([]byte, bool, error) {
	i := strings.LastIndex(c2, ",p=")
	if i < 0 {
		return nil, false, e.fail()
	}
	c2wop := c2[:i]
	proof, err := base64.StdEncoding.DecodeString(c2[i+3:])
	if err != nil {
		return nil, false, e.fail()
	}
	var cbind, nonce string
	for _, f := range strings.Split(c2wop, ",") {
		switch {
		case strings.HasPrefix(f, "c="):
			cbind = f[2:]
		case strings.HasPrefix(f, "r="):
			nonce = f[2:]
		}
	}
	if cbind != base64.StdEncoding.EncodeToString([]byte(e.clientGS2)) || !strings.HasSuffix(nonce, e.nonce) {
		return nil, false, e.fail()
	}
	authMsg := e.c1Bare + "," + e.s1 + "," + c2wop
	clientSig := e.hmac(e.cred.StoredKey, authMsg)
	if len(proof) != len(clientSig) {
		return nil, false, e.fail()
	}
	clientKey := make([]byte, len(proof))
	for k := range proof {
		clientKey[k] = proof[k] ^ clientSig[k]
	}
	d := e.hash()
	d.Write(clientKey)
	if !hmac.Equal(d.Sum(nil), e.cred.StoredKey) {
		return nil, false, e.fail()
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(e.hmac(e.cred.ServerKey, authMsg))), true, nil
}

func (e *scramExchange) hmac(key []byte, msg string) []byte {
	m := hmac.New(func() hash.Hash { return e.hash() }, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func (e *scramExchange) Username() string { return e.conv.Username() }
