package broker

// SaslHandshake and SaslAuthenticate: internal/wire's authenticator answers them on SASL
// listeners, before authentication and for re-authentication (KIP-368). They reach these
// handlers only on a listener without SASL, where Kafka's KafkaApis answers
// ILLEGAL_SASL_STATE (handleSaslHandshakeRequest, handleSaslAuthenticateRequest).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.SASLHandshake, 0, 1, (*Broker).handleSASLHandshake)
	register(kmsg.SASLAuthenticate, 0, 2, (*Broker).handleSASLAuthenticate)
	registerController(kmsg.SASLHandshake, 0, 1, (*Broker).handleSASLHandshake)
	registerController(kmsg.SASLAuthenticate, 0, 2, (*Broker).handleSASLAuthenticate)
}

func (b *Broker) handleSASLHandshake(_ context.Context, req *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return resp
}

func (b *Broker) handleSASLAuthenticate(_ context.Context, req *kmsg.SASLAuthenticateRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate request received after successful authentication"
	resp.ErrorMessage = &msg
	return resp
}
