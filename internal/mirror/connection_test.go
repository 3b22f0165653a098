package mirror

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/security/securitytest"
)

// Source connection tests (spec sections 3, 10, 11): SASL/PLAIN and SCRAM, TLS, secrets
// in DescribeConfigs, reconnection on connection config changes, start.offset and
// several fetchers per source broker.

// saslMech returns franz-go's client mechanism for a Kafka mechanism name.
func saslMech(mech, user, pass string) sasl.Mechanism {
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	default:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	}
}

// newSecureKfake starts a kfake source with opts and returns it with a client that uses
// clientOpts (SASL, TLS) to reach it.
func newSecureKfake(t *testing.T, opts []kfake.Opt, clientOpts ...kgo.Opt) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, clientOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl
}

// produceWith produces n records to topic through cl.
func produceWith(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(fmt.Sprintf("v-%d", i))}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// createMirrorErr sends CreateClusterMirror and returns its error (nil on success).
func (e *env) createMirrorErr(name string, cfg ...string) error {
	req := &mirrorproto.CreateClusterMirrorRequest{MirrorName: name}
	for i := 0; i+1 < len(cfg); i += 2 {
		req.Config = append(req.Config, mirrorproto.CreateClusterMirrorRequestConfig{Name: cfg[i], Value: cfg[i+1]})
	}
	resp := e.m.CreateClusterMirror(ctxT(e.t), req)
	if resp.ErrorCode != 0 {
		return mirrorproto.ErrorFor(resp.ErrorCode, resp.ErrorMessage)
	}
	return nil
}

// checkIdentity compares every partition of topic byte for byte.
func (e *env) checkIdentity(src *kgo.Client, topic string, partitions int32) {
	e.t.Helper()
	for p := int32(0); p < partitions; p++ {
		sameBatches(e.t, fmt.Sprintf("%s-%d", topic, p), sourceBatches(e.t, src, topic, p), localBatches(e.t, e.localLog(topic, p)))
	}
}

// assertClear fails unless err is a single line naming every word of want.
func assertClear(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Fatalf("%s: error is not one line: %q", what, msg)
	}
	for _, w := range want {
		if !strings.Contains(strings.ToLower(msg), strings.ToLower(w)) {
			t.Fatalf("%s: error %q does not mention %q", what, msg, w)
		}
	}
}

func TestSourceSASL(t *testing.T) {
	cases := []struct {
		mech string
		jaas bool
	}{
		{"PLAIN", true},
		{"PLAIN", false},
		{"SCRAM-SHA-256", true},
		{"SCRAM-SHA-512", false},
	}
	for _, tc := range cases {
		name := tc.mech
		if tc.jaas {
			name += "/jaas"
		} else {
			name += "/username"
		}
		t.Run(name, func(t *testing.T) {
			c, src := newSecureKfake(t, []kfake.Opt{kfake.EnableSASL(), kfake.Superuser(tc.mech, "alice", "alice-secret"), kfake.SeedTopics(2, "orders")},
				kgo.SASL(saslMech(tc.mech, "alice", "alice-secret")))
			produceWith(t, src, "orders", 200)
			e := newEnv(t)
			creds := func(pass string) []string {
				cfg := []string{"bootstrap.servers", c.ListenAddrs()[0], "security.protocol", "SASL_PLAINTEXT",
					"sasl.mechanism", tc.mech, "request.timeout.ms", "2000"}
				if tc.jaas {
					module := "org.apache.kafka.common.security.plain.PlainLoginModule"
					if tc.mech != "PLAIN" {
						module = "org.apache.kafka.common.security.scram.ScramLoginModule"
					}
					return append(cfg, "sasl.jaas.config", fmt.Sprintf(`%s required username="alice" password="%s";`, module, pass))
				}
				return append(cfg, "sasl.username", "alice", "sasl.password", pass)
			}
			// wrong credentials: the create fails with one line naming the SASL failure
			err := e.createMirrorErr("bad", creds("wrong")...)
			assertClear(t, "wrong password", err, "cannot reach the source", "SASL")
			if strings.Contains(err.Error(), "wrong") {
				t.Fatalf("the error leaks the password: %v", err)
			}
			if err := e.createMirrorErr("m1", creds("alice-secret")...); err != nil {
				t.Fatal(err)
			}
			e.startTopics("m1", "orders")
			e.waitCaughtUp(src, "m1", "orders")
			produceWith(t, src, "orders", 50)
			e.waitCaughtUp(src, "m1", "orders")
			e.checkIdentity(src, "orders", 2)
		})
	}
}

func TestSourceTLS(t *testing.T) {
	for _, proto := range []string{"SSL", "SASL_SSL"} {
		t.Run(proto, func(t *testing.T) {
			ca := securitytest.NewCA(t, "kmirror test CA")
			opts := []kfake.Opt{kfake.TLS(ca.ServerTLS(t)), kfake.SeedTopics(2, "orders")}
			clientOpts := []kgo.Opt{kgo.DialTLSConfig(ca.ClientTLS(nil))}
			cfg := []string{"security.protocol", proto, "ssl.truststore.location", ca.PEMFile, "request.timeout.ms", "5000"}
			if proto == "SASL_SSL" {
				opts = append(opts, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "bob", "bob-secret"))
				clientOpts = append(clientOpts, kgo.SASL(saslMech("SCRAM-SHA-512", "bob", "bob-secret")))
				cfg = append(cfg, "sasl.mechanism", "SCRAM-SHA-512", "sasl.username", "bob", "sasl.password", "bob-secret")
			}
			c, src := newSecureKfake(t, opts, clientOpts...)
			produceWith(t, src, "orders", 200)
			e := newEnv(t)
			bootstrap := []string{"bootstrap.servers", c.ListenAddrs()[0]}

			// a CA that did not sign the source's certificate: one line naming the cause
			other := securitytest.NewCA(t, "some other CA")
			bad := append(append(append([]string{}, bootstrap...), cfg...), "ssl.truststore.location", other.PEMFile)
			assertClear(t, "wrong CA", e.createMirrorErr("bad", bad...), "cannot reach the source", "certificate")
			// plaintext against a TLS listener fails too
			assertClear(t, "PLAINTEXT to TLS", e.createMirrorErr("bad", append(append([]string{}, bootstrap...), "request.timeout.ms", "2000")...), "cannot reach the source")

			if err := e.createMirrorErr("m1", append(bootstrap, cfg...)...); err != nil {
				t.Fatal(err)
			}
			e.startTopics("m1", "orders")
			e.waitCaughtUp(src, "m1", "orders")
			produceWith(t, src, "orders", 50)
			e.waitCaughtUp(src, "m1", "orders")
			e.checkIdentity(src, "orders", 2)
		})
	}
}

// TestMirrorConfigSecrets: DescribeConfigs of the CLUSTER_MIRROR resource never returns
// sasl.jaas.config, sasl.password, ssl.key.password or inline PEM keys.
func TestMirrorConfigSecrets(t *testing.T) {
	c, _ := newKfake(t)
	e := newEnv(t)
	e.createMirror("m1", c.ListenAddrs()[0], "sasl.jaas.config", `x required username="u" password="SECRET-1";`,
		"sasl.password", "SECRET-2", "ssl.key.password", "SECRET-3", "ssl.keystore.key", "SECRET-4", "mirror.sasl.username", "u")
	cfgs, err := e.m.DescribeMirrorConfigs(ctxT(e.t), "m1")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range cfgs {
		seen[c.Name] = true
		switch c.Name {
		case "sasl.jaas.config", "sasl.password", "ssl.key.password", "ssl.keystore.key":
			if c.Value != nil || !c.IsSensitive {
				t.Fatalf("%s: secret returned: value %q sensitive %v", c.Name, strOf(c.Value), c.IsSensitive)
			}
		default:
			if c.Value != nil && strings.Contains(*c.Value, "SECRET") {
				t.Fatalf("%s leaks a secret: %q", c.Name, *c.Value)
			}
		}
	}
	for _, n := range []string{"sasl.jaas.config", "sasl.password", "ssl.key.password", "sasl.username"} {
		if !seen[n] {
			t.Fatalf("%s not described: %+v", n, cfgs)
		}
	}
	// nor does ListClusterMirrors/DescribeClusterMirrors carry them
	resp := e.m.DescribeClusterMirrors(context.Background(), &mirrorproto.DescribeClusterMirrorsRequest{})
	if s := fmt.Sprintf("%+v", resp); strings.Contains(s, "SECRET") {
		t.Fatalf("DescribeClusterMirrors leaks a secret: %s", s)
	}
}

// alterMirror sets mirror configs through AlterMirrorConfigs (IncrementalAlterConfigs on
// the CLUSTER_MIRROR resource).
func (e *env) alterMirror(name string, kv ...string) {
	e.t.Helper()
	var ops []kmsg.IncrementalAlterConfigsRequestResourceConfig
	for i := 0; i+1 < len(kv); i += 2 {
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Op, op.Value = kv[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[i+1])
		ops = append(ops, op)
	}
	if err := e.m.AlterMirrorConfigs(ctxT(e.t), name, ops, false); err != nil {
		e.t.Fatalf("AlterMirrorConfigs: %v", err)
	}
}

// waitReconnected waits until mirror's source client is no longer old and returns the new one.
func (e *env) waitReconnected(mirror string, old *source) *source {
	e.t.Helper()
	var cur *source
	eventually(e.t, func() string { return "the mirror's source client was never replaced" }, func() bool {
		cur = e.m.runner(mirror).sourceSnapshot()
		return cur != nil && cur != old
	})
	return cur
}

// TestAlterConnectionReconnects: changing bootstrap.servers or the SASL credentials with
// IncrementalAlterConfigs replaces the mirror's source client and its fetchers (spec
// section 10), and mirroring continues; a wrong password shows as FAILED partitions with
// a clear message, and fixing it recovers them.
func TestAlterConnectionReconnects(t *testing.T) {
	c, src := newSecureKfake(t, []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "alice", "pw-1"), kfake.SeedTopics(4, "orders")},
		kgo.SASL(saslMech("SCRAM-SHA-256", "alice", "pw-1")))
	addrs := c.ListenAddrs()
	produceWith(t, src, "orders", 200)
	e := newEnv(t)
	if err := e.createMirrorErr("m1", "bootstrap.servers", addrs[0], "security.protocol", "SASL_PLAINTEXT",
		"sasl.mechanism", "SCRAM-SHA-256", "sasl.username", "alice", "sasl.password", "pw-1", "fetch.backoff.ms", "50", "request.timeout.ms", "2000"); err != nil {
		t.Fatal(err)
	}
	e.startTopics("m1", "orders")
	e.waitCaughtUp(src, "m1", "orders")
	s0 := e.m.runner("m1").sourceSnapshot()

	// another address of the same source cluster (the broker's host name instead of its IP)
	e.alterMirror("m1", "bootstrap.servers", strings.Replace(addrs[0], "127.0.0.1", "localhost", 1))
	s1 := e.waitReconnected("m1", s0)
	produceWith(t, src, "orders", 100)
	e.waitCaughtUp(src, "m1", "orders")

	// rotate alice's password on the source, then on the mirror
	adm := kadm.NewClient(src)
	res, err := adm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw-2"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("rotate the source password: %v", err)
	}
	e.alterMirror("m1", "sasl.password", "pw-2")
	s2 := e.waitReconnected("m1", s1)
	src2, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.SASL(saslMech("SCRAM-SHA-256", "alice", "pw-2")))
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	produceWith(t, src2, "orders", 100)
	e.waitCaughtUp(src2, "m1", "orders")

	// a wrong password: the partitions fail with a message naming the SASL settings
	e.alterMirror("m1", "sasl.password", "not-the-password")
	s3 := e.waitReconnected("m1", s2)
	produceWith(t, src2, "orders", 10)
	var failed string
	eventually(t, func() string { return fmt.Sprintf("no FAILED partition: %+v", e.describe("m1", "orders")) }, func() bool {
		for _, p := range e.describe("m1", "orders") {
			if p.State == mirrorproto.StateFailed && p.ErrorMessage != nil {
				failed = *p.ErrorMessage
				return true
			}
		}
		return false
	})
	assertClear(t, "FAILED after a wrong password", fmt.Errorf("%s", failed), "SASL", "alice")
	if strings.Contains(failed, "not-the-password") {
		t.Fatalf("the error leaks the password: %s", failed)
	}
	// fixed: FAILED partitions are retried and catch up, nothing lost or duplicated
	e.alterMirror("m1", "sasl.password", "pw-2")
	e.waitReconnected("m1", s3)
	e.waitCaughtUp(src2, "m1", "orders")
	e.checkIdentity(src2, "orders", 4)
}

// produceAt produces n records with timestamp ts (one batch) to partition 0 of topic.
func produceAt(t *testing.T, cl *kgo.Client, topic string, n int, ts time.Time) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: 0, Timestamp: ts, Value: []byte(fmt.Sprintf("%s-%d", ts.Format(time.DateOnly), i))}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// TestStartOffset covers start.offset (spec section 11): earliest (the default) mirrors the
// whole history; latest starts the mirror log at the source LEO with lag 0 and mirrors
// only what comes later; an ISO-8601 time starts at the first batch at or after it
// (ListOffsets), or at the LEO when none is.
func TestStartOffset(t *testing.T) {
	topics := []string{"t-default", "t-earliest", "t-latest", "t-time", "t-future"}
	c, src := newSecureKfake(t, []kfake.Opt{kfake.SeedTopics(1, topics...)}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	addr := c.ListenAddrs()[0]
	old, newer := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tp := range topics {
		produceAt(t, src, tp, 30, old)
		produceAt(t, src, tp, 20, newer)
	}
	e := newEnv(t)
	starts := map[string]string{"t-earliest": "earliest", "t-latest": "latest", "t-time": "2020-06-01T00:00:00Z", "t-future": "2999-01-01"}
	wantStart := map[string]int64{"t-default": 0, "t-earliest": 0, "t-latest": 50, "t-time": 30, "t-future": 50}
	for _, tp := range topics {
		cfg := []string{"bootstrap.servers", addr}
		if s, ok := starts[tp]; ok {
			cfg = append(cfg, "start.offset", s)
		}
		if err := e.createMirrorErr("m-"+tp, cfg...); err != nil {
			t.Fatal(err)
		}
		e.startTopics("m-"+tp, tp)
	}
	check := func() {
		t.Helper()
		for _, tp := range topics {
			e.waitCaughtUp(src, "m-"+tp, tp)
			l := e.localLog(tp, 0)
			if got := l.LogStartOffset(); got != wantStart[tp] {
				t.Fatalf("%s: mirror log start %d, want %d", tp, got, wantStart[tp])
			}
			for _, d := range e.describe("m-"+tp, tp) {
				if d.Lag != 0 {
					t.Fatalf("%s: lag %d after catching up", tp, d.Lag)
				}
			}
			var want []batchAt
			for _, b := range sourceBatches(t, src, tp, 0) {
				if b.offset >= wantStart[tp] {
					want = append(want, b)
				}
			}
			sameBatches(t, tp, want, localBatches(t, l))
		}
	}
	check()
	// later records are mirrored in every case
	for _, tp := range topics {
		produceAt(t, src, tp, 5, time.Now())
	}
	check()
	if got := len(localBatches(t, e.localLog("t-latest", 0))); got != 1 {
		t.Fatalf("t-latest: %d batches mirrored, want only the one produced after the start", got)
	}
	if err := e.createMirrorErr("bad", "bootstrap.servers", addr, "start.offset", "yesterday"); err == nil || !strings.Contains(err.Error(), "start.offset") {
		t.Fatalf("a bad start.offset: %v", err)
	}
}

// TestTwoFetchersPerSourceBroker: with mirror.num.replica.fetchers=2 the 8 partitions of a
// one-broker source are split over two fetchers (two disjoint partition sets in the
// mirror's Fetch requests), and byte identity holds.
func TestTwoFetchersPerSourceBroker(t *testing.T) {
	c, src := newSecureKfake(t, []kfake.Opt{kfake.SeedTopics(8, "orders")})
	var mu sync.Mutex
	sets := map[string][]int32{}
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		if req.MaxWaitMillis != 250 || len(req.Topics) != 1 { // the mirror's fetches only
			return nil, nil, false
		}
		var ps []int32
		for _, p := range req.Topics[0].Partitions {
			ps = append(ps, p.Partition)
		}
		slices.Sort(ps)
		mu.Lock()
		sets[fmt.Sprint(ps)] = ps
		mu.Unlock()
		return nil, nil, false
	})
	produceWith(t, src, "orders", 800)
	cfg := fastConfig()
	cfg.NumReplicaFetchers = 2
	e := newEnvWith(t, cfg)
	e.createMirror("m1", c.ListenAddrs()[0], "fetch.wait.max.ms", "250")
	e.startTopics("m1", "orders")
	e.waitCaughtUp(src, "m1", "orders")
	produceWith(t, src, "orders", 400)
	e.waitCaughtUp(src, "m1", "orders")
	e.checkIdentity(src, "orders", 8)

	// two observed partition sets, disjoint, covering all 8
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, a := range sets {
		for _, b := range sets {
			seen := map[int32]int{}
			for _, p := range append(slices.Clone(a), b...) {
				seen[p]++
			}
			if len(a) > 0 && len(b) > 0 && len(a)+len(b) == 8 && len(seen) == 8 {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("no two disjoint fetchers covering the 8 partitions; fetch partition sets: %v", sets)
	}
}

// TestThrottledRate: mirror.replication.throttled.rate caps the mirror fetch bytes of the
// broker for the partitions listed in their topic's mirror.replication.throttled.replicas
// (Kafka's KIP-73 semantics), and both follow dynamic changes made with kadm against the
// real broker. A listed topic mirroring ~320 KiB at 128 KiB/s in 16 KiB fetches cannot
// take less than the bytes beyond the one-second burst and the last response divided by
// the rate (a lower bound, not a deadline), and its partition is held back; an unlisted
// topic and a deleted rate never hold anything back.
func TestThrottledRate(t *testing.T) {
	c, src := newSecureKfake(t, []kfake.Opt{kfake.SeedTopics(1, "bulk", "free")})
	produce := func(topic string) (total int64) {
		t.Helper()
		before := sourceEnds(t, src, topic)[0]
		recs := make([]*kgo.Record, 320)
		for i := range recs {
			val := make([]byte, 1000) // random: kgo compresses batches by default
			if _, err := rand.Read(val); err != nil {
				t.Fatal(err)
			}
			recs[i] = &kgo.Record{Topic: topic, Value: val}
		}
		for i := 0; i < len(recs); i += 10 { // batches of ~10 KB
			if err := src.ProduceSync(context.Background(), recs[i:i+10]...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		for _, b := range sourceBatches(t, src, topic, 0) {
			if b.offset >= before {
				total += int64(len(b.data))
			}
		}
		return total
	}
	kb := startBroker(t)
	e := kb.env()
	e.createMirror("m1", c.ListenAddrs()[0], "fetch.max.bytes", "16384", "fetch.response.max.bytes", "16384", "fetch.wait.max.ms", "100")
	e.startTopics("m1", "bulk", "free")
	e.waitCaughtUp(src, "m1", "bulk")

	const rate = 128 << 10
	adm := kadm.NewClient(kb.client())
	ctx := ctxT(t)
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "mirror.replication.throttled.rate", Value: kmsg.StringPtr(fmt.Sprint(rate))}}); err != nil {
		t.Fatal(err)
	}
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "mirror.replication.throttled.replicas", Value: kmsg.StringPtr("*")}}, "bulk")
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string { return "the dynamic rate reaches the mirror manager" }, func() bool {
		return kb.m.config().ThrottledRate == rate && kb.m.partitionOf("bulk", 0).throttled.Load()
	})

	// an unlisted topic is not throttled
	produce("free")
	e.waitCaughtUp(src, "m1", "free")
	if w := kb.m.throttle.held.Load(); w != 0 {
		t.Fatalf("the throttle held partitions back %v for a topic without mirror.replication.throttled.replicas", time.Duration(w))
	}

	total := produce("bulk")
	begin := time.Now()
	e.waitCaughtUp(src, "m1", "bulk")
	took := time.Since(begin)
	if least := time.Duration(float64(total-rate-16384) / rate * float64(time.Second)); took < least {
		t.Fatalf("mirrored %d bytes in %v at %d bytes/s: the throttle allows at least %v", total, took, rate, least)
	}
	slept := kb.m.throttle.held.Load()
	if slept == 0 {
		t.Fatal("the throttle never held the listed topic back")
	}
	t.Logf("mirrored %d bytes in %v", total, took)

	// deleting the dynamic rate falls back to server.properties (unlimited)
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "mirror.replication.throttled.rate"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string { return "the deleted rate reaches the mirror manager" }, func() bool {
		return kb.m.config().ThrottledRate == 0
	})
	produce("bulk")
	e.waitCaughtUp(src, "m1", "bulk") // also ends a round begun over the quota
	slept = kb.m.throttle.held.Load()
	produce("bulk")
	e.waitCaughtUp(src, "m1", "bulk")
	if w := kb.m.throttle.held.Load(); w != slept {
		t.Fatalf("the throttle held partitions back %v more after the rate was deleted", time.Duration(w-slept))
	}
	e.checkIdentity(src, "bulk", 1)
	e.checkIdentity(src, "free", 1)
}

// TestDynamicReplicaFetchers: mirror.num.replica.fetchers changed with kadm while
// mirroring regroups the partitions over the new number of fetchers (and stops the
// fetchers no longer needed) without losing or repeating a batch.
func TestDynamicReplicaFetchers(t *testing.T) {
	c, src := newSecureKfake(t, []kfake.Opt{kfake.SeedTopics(8, "orders")})
	kb := startBroker(t)
	e := kb.env()
	e.createMirror("m1", c.ListenAddrs()[0], "fetch.wait.max.ms", "100")
	e.startTopics("m1", "orders")
	produceWith(t, src, "orders", 80)
	e.waitCaughtUp(src, "m1", "orders")
	fetchers := func() int { return int(kb.m.runner("m1").nFetchers.Load()) }
	adm := kadm.NewClient(kb.client())
	// out-of-range values are refused (INVALID_CONFIG) and change nothing
	for name, v := range map[string]string{"mirror.num.replica.fetchers": "0",
		"mirror.metadata.refresh.interval.ms": "10000000000000", "mirror.replication.throttled.rate": "0"} {
		rs, err := adm.AlterBrokerConfigs(ctxT(t), []kadm.AlterConfig{{Name: name, Value: kmsg.StringPtr(v)}})
		if err == nil && len(rs) > 0 {
			err = rs[0].Err
		}
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Fatalf("%s=%s: got %v, want INVALID_CONFIG", name, v, err)
		}
	}
	if c := kb.m.config(); c.NumReplicaFetchers != 1 || c.ThrottledRate != 0 {
		t.Fatalf("refused values reached the manager: %+v", c)
	}
	for _, n := range []int{3, 1} {
		if _, err := adm.AlterBrokerConfigs(ctxT(t), []kadm.AlterConfig{{Name: "mirror.num.replica.fetchers", Value: kmsg.StringPtr(fmt.Sprint(n))}}); err != nil {
			t.Fatal(err)
		}
		produceWith(t, src, "orders", 80)
		e.waitCaughtUp(src, "m1", "orders")
		eventually(t, func() string { return fmt.Sprintf("%d fetchers for 8 partitions, have %d", n, fetchers()) }, func() bool {
			return fetchers() == n
		})
	}
	e.checkIdentity(src, "orders", 8)
}

// TestFetchersOwnConnections: with mirror.num.replica.fetchers=2 each fetcher has its own
// connection to the source broker (spec section 3). The source is a kmirror broker, which
// like Kafka answers one connection's requests in order. Once caught up, both fetchers
// park in 2-minute long polls (fetch.wait.max.ms). Records produced only to the other
// fetcher's partitions must then be mirrored: on a shared connection that Fetch would
// queue behind partition 0's parked one, past the test's wait.
func TestFetchersOwnConnections(t *testing.T) {
	const parts = 8
	a := startBroker(t)
	acl := a.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopicOn(t, acl, "orders", parts)
	produceTo := func(ps []int32) {
		t.Helper()
		var recs []*kgo.Record
		for _, p := range ps {
			for i := range 5 {
				recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
			}
		}
		if err := acl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// partition i goes to fetcher fnv32a("orders-i") mod 2 (runner.assign)
	fetcherOf := func(p int32) uint32 {
		h := fnv.New32a()
		fmt.Fprintf(h, "orders-%d", p)
		return h.Sum32() % 2
	}
	var all, others []int32
	for p := int32(0); p < parts; p++ {
		all = append(all, p)
		if fetcherOf(p) != fetcherOf(0) {
			others = append(others, p)
		}
	}
	if len(others) == 0 {
		t.Fatal("every partition hashes to partition 0's fetcher")
	}
	produceTo(all)
	cfg := fastConfig()
	cfg.NumReplicaFetchers = 2
	e := newEnvWith(t, cfg)
	e.createMirror("m1", a.b.Addr(), "fetch.wait.max.ms", "120000")
	e.startTopics("m1", "orders")
	e.waitCaughtUp(acl, "m1", "orders")
	time.Sleep(200 * time.Millisecond) // both fetchers are back in their long polls
	produceTo(others)
	e.waitCaughtUp(acl, "m1", "orders")
	e.checkIdentity(acl, "orders", parts)
}
