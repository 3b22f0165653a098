package clientconf

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/internal/security"
)

// DefaultBootstrap is --bootstrap-server's default, as in Apache Kafka's tools' docs.
const DefaultBootstrap = "localhost:9092"

// Load reads the --command-config file (none when path is empty) and returns Options
// of bootstrap and its properties; errors name the flag at fault.
func Load(bootstrap, path string) ([]kgo.Opt, error) {
	var props []Property
	if path != "" {
		var err error
		if props, err = ReadProperties(path); err != nil {
			return nil, fmt.Errorf("--command-config: %v", err)
		}
	}
	opts, err := Options(bootstrap, props)
	if err != nil && !strings.HasPrefix(err.Error(), "--bootstrap-server") {
		return nil, fmt.Errorf("--command-config: %v", err)
	}
	return opts, err
}

// Options builds the kgo options of a client of the cluster at bootstrap (a
// comma-separated host:port list) from the --command-config properties (security.protocol
// PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL; sasl.mechanism PLAIN,
// SCRAM-SHA-256 or SCRAM-SHA-512 with sasl.jaas.config or
// sasl.username/sasl.password; the ssl.* stores of internal/security: PEM, PKCS12 or
// JKS): the seed brokers, TLS and SASL. Other keys are ignored, as Kafka's tools do; the
// caller adds its client ID, timeouts and versions.
func Options(bootstrap string, props []Property) ([]kgo.Opt, error) {
	var seeds []string
	for _, s := range strings.Split(bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("--bootstrap-server is empty")
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...)}
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

// Flags are --bootstrap-server and --command-config of a client command.
type Flags struct {
	Bootstrap     string
	CommandConfig string
}

// Register adds the flags to fs: --bootstrap-server (default DefaultBootstrap) and
// --command-config.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.Bootstrap, "bootstrap-server", DefaultBootstrap, "comma-separated host:port list of the cluster's brokers")
	fs.StringVar(&f.CommandConfig, "command-config", "", "client properties file (security.protocol, sasl.*, ssl.truststore.*)")
}

// Client dial and retry timeouts of Flags.Client: an unreachable bootstrap server fails
// within about their sum.
const (
	DialTimeout  = 5 * time.Second
	RetryTimeout = 10 * time.Second
)

// CommandTimeout bounds each client command (topics, groups) as a whole.
const CommandTimeout = 2 * time.Minute

// Client returns a franz-go client of the cluster the flags name, with client ID id,
// DialTimeout, RetryTimeout and extra options.
func (f *Flags) Client(id string, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := Load(f.Bootstrap, f.CommandConfig)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ClientID(id), kgo.DialTimeout(DialTimeout), kgo.RetryTimeout(RetryTimeout))
	return kgo.NewClient(append(opts, extra...)...)
}
