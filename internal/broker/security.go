package broker

// The security of the broker's listeners (Kafka's ChannelBuilders for the listener's
// security protocol): TLS from the ssl.* keys, SASL from sasl.enabled.mechanisms and the
// listener's JAAS configs, each key overridable per listener as
// listener.name.<name>.<key> (docs/security.md).

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/security"
	"github.com/kmirror/kmirror/internal/wire"
)

// listenerGetter returns the value of key for listener name: listener.name.<name
// lowercased>.<key> when set, else the global key (its default when unset).
func (b *Broker) listenerGetter(name string) security.Getter {
	prefix := "listener.name." + strings.ToLower(name) + "."
	return func(key string) string {
		if v, ok := b.cfg.Get(prefix + key); ok {
			return v
		}
		return b.cfg.String(key)
	}
}

// listenerSecurity returns the wire security of listener l: nil for PLAINTEXT. Errors
// are one line naming the listener and the key.
func (b *Broker) listenerSecurity(l config.Listener) (*wire.Security, error) {
	proto := l.SecurityProtocol
	if proto == config.ProtocolPlaintext {
		return nil, nil
	}
	get := b.listenerGetter(l.Name)
	sec := &wire.Security{
		FailedAuthenticationDelay: time.Duration(b.cfg.Int64("connection.failed.authentication.delay.ms")) * time.Millisecond,
		MaxReauth:                 time.Duration(b.cfg.Int64("connections.max.reauth.ms")) * time.Millisecond,
	}
	if proto == config.ProtocolSSL || proto == config.ProtocolSASLSSL {
		tcfg, err := security.ServerTLSConfig(get)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", l.Name, err)
		}
		mapper, err := security.NewPrincipalMapper(get("ssl.principal.mapping.rules"))
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", l.Name, err)
		}
		sec.TLS, sec.CertPrincipal = tcfg, mapper.CertPrincipal
	}
	if proto == config.ProtocolSASLPlaintext || proto == config.ProtocolSASLSSL {
		if err := b.listenerSASL(l, get, sec); err != nil {
			return nil, fmt.Errorf("listener %s: %w", l.Name, err)
		}
	}
	return sec, nil
}

// listenerSASL sets sec's SASL mechanisms: PLAIN with the users of the listener's
// PlainLoginModule (listener.name.<name>.plain.sasl.jaas.config, user_NAME options), and
// SCRAM against the credentials of the metadata log.
func (b *Broker) listenerSASL(l config.Listener, get security.Getter, sec *wire.Security) error {
	var plainUsers map[string]string
	for _, m := range strings.Split(get("sasl.enabled.mechanisms"), ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		switch m {
		case "":
			continue
		case security.MechanismPlain:
			key := "listener.name." + strings.ToLower(l.Name) + ".plain.sasl.jaas.config"
			v, _ := b.cfg.Get(key)
			if v == "" {
				return fmt.Errorf("SASL mechanism PLAIN needs %s (PlainLoginModule with user_NAME=\"password\" options)", key)
			}
			j, err := security.ParseJAAS(v)
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			plainUsers = j.PlainUsers()
		case security.MechanismScram256, security.MechanismScram512:
		default:
			return fmt.Errorf("sasl.enabled.mechanisms: %s is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", m)
		}
		if !slices.Contains(sec.Mechanisms, m) {
			sec.Mechanisms = append(sec.Mechanisms, m)
		}
	}
	if len(sec.Mechanisms) == 0 {
		return fmt.Errorf("sasl.enabled.mechanisms is empty on a SASL listener")
	}
	sec.NewExchange = func(mechanism string) wire.SASLExchange {
		if mechanism == security.MechanismPlain {
			return security.NewPlainExchange(plainUsers)
		}
		e, _ := security.NewScramExchange(mechanism, b.scramCredential)
		return e
	}
	return nil
}

// scramCredential looks a user's SCRAM credential up in the metadata image.
func (b *Broker) scramCredential(mechanism, user string) (security.ScramCredential, bool) {
	if b.meta == nil {
		return security.ScramCredential{}, false
	}
	c := b.meta.Image().ScramCredentials[user][security.ScramMechanismCode(mechanism)]
	if c == nil {
		return security.ScramCredential{}, false
	}
	return security.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, true
}

// clientOpts returns the franz-go options of this broker's own connections to listener
// name of another node (or of itself): TLS from the listener's ssl.* keys (its truststore
// verifies the peer, its keystore is the client certificate), and SASL with
// sasl.mechanism.inter.broker.protocol and the username and password of the listener's
// listener.name.<name>.<mechanism>.sasl.jaas.config, as Kafka's inter-broker clients.
// Errors name the missing key.
func (b *Broker) clientOpts(name string) ([]kgo.Opt, error) {
	proto := config.ProtocolPlaintext
	for _, l := range b.node.AdvertisedListeners {
		if l.Name == name {
			proto = l.SecurityProtocol
		}
	}
	get := b.listenerGetter(name)
	var opts []kgo.Opt
	if proto == config.ProtocolSSL || proto == config.ProtocolSASLSSL {
		tcfg, err := security.ClientTLSConfig(get)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", name, err)
		}
		opts = append(opts, kgo.DialTLSConfig(tcfg))
	}
	if proto == config.ProtocolSASLPlaintext || proto == config.ProtocolSASLSSL {
		mech := strings.ToUpper(strings.TrimSpace(get("sasl.mechanism.inter.broker.protocol")))
		key := "listener.name." + strings.ToLower(name) + "." + strings.ToLower(mech) + ".sasl.jaas.config"
		v, _ := b.cfg.Get(key)
		if v == "" {
			return nil, fmt.Errorf("listener %s: brokers authenticate to each other with sasl.mechanism.inter.broker.protocol=%s and the username and password of %s, which is not set", name, mech, key)
		}
		j, err := security.ParseJAAS(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		user, pass := j.Credentials()
		if user == "" {
			return nil, fmt.Errorf("%s has no username=\"...\" for the brokers' own connections", key)
		}
		switch mech {
		case security.MechanismPlain:
			opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		case security.MechanismScram256:
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		case security.MechanismScram512:
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf("sasl.mechanism.inter.broker.protocol: %s is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", mech)
		}
	}
	return opts, nil
}
