package mirrorscli

import (
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/security"
)

// Client timeouts. An unreachable bootstrap server fails within about
// dialTimeout + retryTimeout; a slow broker gets actionTimeout per request.
const (
	dialTimeout   = 5 * time.Second
	retryTimeout  = 5 * time.Second
	actionTimeout = 2 * time.Minute
)

// clientOptions builds the kgo options for the destination cluster from
// --bootstrap-server and the --command-config properties (security.protocol
// PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL; sasl.mechanism PLAIN,
// SCRAM-SHA-256 or SCRAM-SHA-512 with sasl.jaas.config or
// sasl.username/sasl.password; the ssl.* stores of internal/security: PEM, PKCS12 or
// JKS). Other keys are ignored, as Kafka's tools do.
func clientOptions(bootstrap string, props []Property) ([]kgo.Opt, error) {
	var seeds []string
	for _, s := range strings.Split(bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("--bootstrap-server is empty")
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.MaxVersions(mirrorproto.ClientVersions()),
		kgo.DialTimeout(dialTimeout),
		kgo.RequestRetries(1),
		kgo.RetryTimeout(retryTimeout),
		kgo.RequestTimeoutOverhead(actionTimeout),
		kgo.ClientID("kmirror-mirrors"),
	}
	cfg := map[string]string{}
	for _, p := range props {
		cfg[p.Key] = p.Value
	}
	protocol := strings.ToUpper(cfg["security.protocol"])
	if protocol == "" {
		protocol = "PLAINTEXT"
	}
	useTLS, useSASL := false, false
	switch protocol {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return nil, fmt.Errorf("unsupported security.protocol %q", cfg["security.protocol"])
	}
	if useTLS {
		tc, err := security.ClientTLSConfig(func(k string) string {
			if v, ok := cfg[k]; ok {
				return v
			}
			if k == "ssl.endpoint.identification.algorithm" {
				return "https" // Kafka's default
			}
			return ""
		})
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if useSASL {
		user, pass := cfg["sasl.username"], cfg["sasl.password"]
		if jaas := cfg["sasl.jaas.config"]; jaas != "" {
			j, err := security.ParseJAAS(jaas)
			if err != nil {
				return nil, err
			}
			user, pass = j.Credentials()
		}
		mech := strings.ToUpper(cfg["sasl.mechanism"])
		switch mech {
		case "", "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf("unsupported sasl.mechanism %q", cfg["sasl.mechanism"])
		}
	}
	return opts, nil
}
