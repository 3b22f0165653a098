package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// securitySettings are the sizes of -only security.
type securitySettings struct {
	KafkaVersion   string  `json:"kafka_version"`
	Records        int     `json:"records"`
	Partitions     int     `json:"partitions"`
	LatencyRate    int     `json:"latency_records_per_s"`
	LatencySeconds float64 `json:"latency_seconds"`
	RecordBytes    int     `json:"record_bytes"`
	Mechanism      string  `json:"sasl_mechanism"`
	TLS            string  `json:"tls"`
	DataDir        string  `json:"data_dir"`
	Client         string  `json:"client"`
}

// securityResult is one broker's figures on one of its listeners.
type securityResult struct {
	Broker      string     `json:"broker"`
	Listener    string     `json:"listener"` // PLAINTEXT or SASL_SSL
	Produce     throughput `json:"produce"`
	Consume     throughput `json:"consume"`
	ProduceCPUS float64    `json:"broker_cpu_s_produce"` // the broker's CPU seconds during the produce run
	ConsumeCPUS float64    `json:"broker_cpu_s_consume"`
	Latency     latency    `json:"produce_latency_at_fixed_rate"`
}

type securityReport struct {
	Date     string           `json:"date"`
	Machine  machine          `json:"machine"`
	Settings securitySettings `json:"settings"`
	Results  []securityResult `json:"results"` // kmirror PLAINTEXT, kmirror SASL_SSL, Kafka PLAINTEXT, Kafka SASL_SSL
}

// The SCRAM user of the SASL_SSL runs.
const (
	benchUser     = "bench"
	benchPassword = "bench-secret"
)

// benchSecurity runs issue 16's measurement: one kmirror node and then one Apache Kafka
// node (a 1-node cluster of startCluster: combined broker+controller), each with a
// PLAINTEXT listener and a SASL_SSL one (SCRAM-SHA-512, PEM keystore, the same
// server.properties keys), each listener measured in turn by the same franz-go settings.
func benchSecurity(bin, tmp string, ss securitySettings) securityReport {
	rep := securityReport{Date: time.Now().UTC().Format(time.RFC3339), Machine: describeMachine(tmp), Settings: ss}
	keystore, ca := serverCertificate(filepath.Join(tmp, "tls"))
	pool := x509.NewCertPool()
	b, err := os.ReadFile(ca)
	must(err)
	pool.AppendCertsFromPEM(b)
	props := []string{
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + keystore,
	}
	secure := func(addr string) {
		listenerOpts.Store(addr, []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
			kgo.SASL(scram.Auth{User: benchUser, Pass: benchPassword}.AsSha512Mechanism())})
	}

	for _, kind := range []clusterKind{kmirrorKind(bin), kafkaKind(ss.KafkaVersion)} {
		logf("security: %s", kind.name)
		saslAddr := freeAddr()
		c := startCluster(kind, filepath.Join(tmp, "s-"+kind.short), 1, func(int) []string { return []string{"SASL_SSL://" + saslAddr} }, props)
		p := c.nodes[0]
		p.waitMetadata(2 * time.Minute)
		secure(saslAddr)
		rep.Results = append(rep.Results, securityListeners(kind.name, p, saslAddr, ss)...)
		c.stop()
	}
	return rep
}

// securityListeners creates the SCRAM user over p's PLAINTEXT listener (AlterUserScramCredentials,
// what kafka-configs --add-config 'SCRAM-SHA-512=[…]' sends), waits until it
// authenticates on saslAddr, and measures PLAINTEXT, then SASL_SSL.
func securityListeners(name string, p *proc, saslAddr string, ss securitySettings) []securityResult {
	cl := newClient(seed(p.addr)...)
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(context.Background(), nil, []kadm.UpsertSCRAM{{User: benchUser, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: benchPassword}})
	cl.Close()
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		fatalf("%s: create SCRAM user: %v", name, err)
	}
	waitAuthenticated(name, saslAddr)
	var out []securityResult
	for _, l := range []struct{ listener, addr string }{{"PLAINTEXT", p.addr}, {"SASL_SSL", saslAddr}} {
		out = append(out, securityRun(name, p, l.listener, l.addr, ss))
	}
	return out
}

// waitAuthenticated polls a Metadata request over the SASL_SSL listener addr (as the
// SCRAM user) until it succeeds: the credential reaches the listener through the
// metadata log.
func waitAuthenticated(name, addr string) {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		cl := newClient(append(seed(addr), kgo.RequestRetries(0))...)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		cancel()
		cl.Close()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			fatalf("%s: SASL_SSL %s as %s: %v", name, addr, benchUser, err)
		}
	}
}

// securityRun measures one listener: a warm-up (TLS and JIT), produce and consume
// throughput with the broker's CPU seconds, and produce latency at a fixed rate.
func securityRun(name string, p *proc, listener, addr string, ss securitySettings) securityResult {
	r := securityResult{Broker: name, Listener: listener}
	sfx := strings.ToLower(listener)
	for _, t := range []string{"warm-", "t-", "lat-"} {
		createTopic(addr, t+sfx, ss.Partitions, nil)
	}
	logf("security: %s %s: warm-up, then produce/consume %d records", name, listener, ss.Records)
	consume(addr, "warm-"+sfx, produce(addr, "warm-"+sfx, "none", ss.Records/3).Records)
	settle()
	c0 := p.cpu()
	r.Produce = produce(addr, "t-"+sfx, "none", ss.Records)
	r.ProduceCPUS = p.cpu() - c0
	settle()
	c0 = p.cpu()
	r.Consume = consume(addr, "t-"+sfx, ss.Records)
	r.ConsumeCPUS = p.cpu() - c0
	settle()
	logf("security: %s %s: latency at %d records/s for %.0fs", name, listener, ss.LatencyRate, ss.LatencySeconds)
	r.Latency = summarize(paced(addr, "lat-"+sfx, "none", ss.LatencyRate, time.Duration(ss.LatencySeconds*float64(time.Second)), 1).Lat)
	logf("security: %s %s: produce %.0f MB/s, consume %.0f MB/s, p99 %.2f ms", name, listener, r.Produce.MBps, r.Consume.MBps, r.Latency.P99Ms)
	return r
}

// serverCertificate makes, with openssl (as the acceptance check security-scram-acl
// does), a CA and a server certificate for 127.0.0.1 and localhost with RSA 2048 keys in
// dir, and returns the PEM keystore (PKCS#8 key and certificate, ssl.keystore.type=PEM)
// and the CA's PEM file.
func serverCertificate(dir string) (keystore, ca string) {
	must(os.MkdirAll(dir, 0o755))
	script := `set -e
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=bench-ca -keyout ca.key -out ca.pem
openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server.key -out server.csr
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext -out server.crt
openssl pkcs8 -topk8 -nocrypt -in server.key -out server.p8
cat server.p8 server.crt > keystore.pem`
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		fatalf("openssl: %v\n%s", err, b)
	}
	return filepath.Join(dir, "keystore.pem"), filepath.Join(dir, "ca.pem")
}

func renderSecurityMarkdown(r securityReport) string {
	var b strings.Builder
	s := r.Settings
	fmt.Fprintf(&b, "# kmirror over SASL_SSL against PLAINTEXT, and against Apache Kafka %s over SASL_SSL (issue 16) — %s\n\n", s.KafkaVersion, r.Date[:10])
	b.WriteString(machineAndClient(r.Machine, s.DataDir, s.Client, s.RecordBytes, "go run ./bench/versus -only security (make bench-security)"))
	fmt.Fprintf(&b, "One kmirror node, then one Apache Kafka %s node (KRaft, broker and controller in one process formatted with `storage format`, -Xmx1G), each with a PLAINTEXT listener and a SASL_SSL listener (%s, %s; the same server.properties keys), the SCRAM user created with AlterUserScramCredentials (what kafka-configs --add-config sends). "+
		"Each listener in turn: a warm-up, %d records produced as fast as the client goes to a %d-partition topic, consumed from the start, then produce latency (Produce call → acknowledgement) at %d records/s for %.0f s. "+
		"CPU is the broker's during the run.\n\n",
		s.KafkaVersion, s.Mechanism, s.TLS, s.Records, s.Partitions, s.LatencyRate, s.LatencySeconds)
	res := r.Results
	b.WriteString("| | kmirror PLAINTEXT | kmirror SASL_SSL | Kafka PLAINTEXT | Kafka SASL_SSL | kmirror SASL_SSL / PLAINTEXT | Kafka SASL_SSL / PLAINTEXT | kmirror / Kafka, SASL_SSL |\n|---|---|---|---|---|---|---|---|\n")
	row := func(name string, f func(securityResult) float64) {
		v := make([]float64, len(res))
		for i := range res {
			v[i] = f(res[i])
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", name, num(v[0]), num(v[1]), num(v[2]), num(v[3]), ratio(v[1], v[0]), ratio(v[3], v[2]), ratio(v[1], v[3]))
	}
	row("produce, MB/s", func(x securityResult) float64 { return x.Produce.MBps })
	row("consume, MB/s", func(x securityResult) float64 { return x.Consume.MBps })
	row("broker CPU s per GB produced", func(x securityResult) float64 { return x.ProduceCPUS / (float64(x.Produce.Records*recordSize) / 1e9) })
	row("broker CPU s per GB consumed", func(x securityResult) float64 { return x.ConsumeCPUS / (float64(x.Consume.Records*recordSize) / 1e9) })
	row("produce p50, ms", func(x securityResult) float64 { return x.Latency.P50Ms })
	row("produce p99, ms", func(x securityResult) float64 { return x.Latency.P99Ms })
	row("produce max, ms", func(x securityResult) float64 { return x.Latency.MaxMs })
	return b.String()
}
