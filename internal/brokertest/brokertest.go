// Package brokertest starts real kmirror brokers inside a test process, on loopback
// ports chosen by the kernel and data directories under t.TempDir(), for integration
// tests driven through real clients (franz-go, kcat).
package brokertest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/node"
)

// Broker is a running test broker.
type Broker struct {
	*broker.Broker
	Dir   string
	Props map[string]string
	t     testing.TB
	done  chan struct{}
}

// Start runs a broker with test-friendly defaults (port 0, no initial rebalance delay,
// fast mirror sync) overridden by props, and stops it when the test ends.
func Start(t testing.TB, props map[string]string) *Broker {
	t.Helper()
	dir := t.TempDir()
	p := map[string]string{
		"listeners":                           "PLAINTEXT://127.0.0.1:0",
		"log.dirs":                            dir,
		"group.initial.rebalance.delay.ms":    "0",
		"offsets.topic.num.partitions":        "4",
		"mirror.state.topic.num.partitions":   "4",
		"mirror.metadata.refresh.interval.ms": "1000",
	}
	for k, v := range props {
		p[k] = v
	}
	b := &Broker{Dir: dir, Props: p, t: t}
	b.start()
	t.Cleanup(b.Stop)
	return b
}

func (b *Broker) start() {
	b.t.Helper()
	cfg, err := config.NewValues(config.Broker, b.Props, false)
	if err != nil {
		b.t.Fatal(err)
	}
	var out io.Writer = io.Discard
	if os.Getenv("KMIRROR_TEST_LOG") != "" {
		out = os.Stderr
	}
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	br, err := node.New(cfg, logger)
	if err != nil {
		b.t.Fatal(err)
	}
	b.Broker = br
	b.done = make(chan struct{})
	go func() { defer close(b.done); br.Serve() }()
	// Pin the port so that a restart comes back on the same address.
	name, _, ok := strings.Cut(b.Props["listeners"], "://")
	if !ok {
		name = config.ProtocolPlaintext
	}
	b.Props["listeners"] = name + "://" + br.Addr()
}

// Stop shuts the broker down cleanly (idempotent).
func (b *Broker) Stop() {
	if b.Broker == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b.Broker.Shutdown(ctx)
	<-b.done
	b.Broker = nil
}

// Restart stops the broker and starts it again on the same data and address.
func (b *Broker) Restart() {
	b.t.Helper()
	b.Stop()
	b.start()
}

// MirrorFrom creates the cluster mirror name on b with bootstrap.servers=source and
// starts topics in it, over the wire (StartMirror); any error fails the test.
func (b *Broker) MirrorFrom(ctx context.Context, name, source string, topics ...string) {
	b.t.Helper()
	StartMirror(ctx, b.t, b.Client(kgo.MaxVersions(mirrorproto.ClientVersions())), name, source, topics...)
}

// StartMirror creates the cluster mirror name with bootstrap.servers=source through adm
// (a client of the destination cluster that knows the mirror RPCs:
// kgo.MaxVersions(mirrorproto.ClientVersions())) and starts topics in it
// (CreateClusterMirror, StartMirrorTopics); any error fails the test.
func StartMirror(ctx context.Context, t testing.TB, adm *kgo.Client, name, source string, topics ...string) {
	t.Helper()
	cr, err := adm.Request(ctx, &mirrorproto.CreateClusterMirrorRequest{MirrorName: name,
		Config: []mirrorproto.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: source}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := cr.(*mirrorproto.CreateClusterMirrorResponse); r.ErrorCode != 0 {
		t.Fatal(mirrorproto.ErrorFor(r.ErrorCode, r.ErrorMessage))
	}
	sreq := mirrorproto.NewStartMirrorTopicsRequest()
	sreq.MirrorName = name
	for _, topic := range topics {
		sreq.Topics = append(sreq.Topics, mirrorproto.StartMirrorTopicsRequestTopic{TopicName: topic})
	}
	sr, err := adm.Request(ctx, sreq)
	if err != nil {
		t.Fatal(err)
	}
	r := sr.(*mirrorproto.StartMirrorTopicsResponse)
	if err := mirrorproto.ErrorFor(r.ErrorCode, r.ErrorMessage); err != nil {
		t.Fatal(err)
	}
	for _, tr := range r.Topics {
		if err := mirrorproto.ErrorFor(tr.ErrorCode, tr.ErrorMessage); err != nil {
			t.Fatalf("StartMirrorTopics %s: %v", tr.Name, err)
		}
	}
}

// Client returns a franz-go client for the broker, closed when the test ends.
func (b *Broker) Client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}
