package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kmirror/kmirror/internal/clustertest"
	"github.com/kmirror/kmirror/internal/security/securitytest"
)

// TestInterBrokerSASLSSL: three combined nodes whose broker listener, the inter-broker
// one, is SASL_SSL (PLAIN, the brokers authenticating with the listener's JAAS
// username) replicate: a topic with replication factor 3 and min.insync.replicas=3
// takes acks=all writes, which needs every follower's replica fetcher to fetch over
// SASL_SSL, and the records read back.
func TestInterBrokerSASLSSL(t *testing.T) {
	ca := securitytest.NewCA(t, "ca")
	server := ca.Server(t)
	c := clustertest.New(t, clustertest.Spec{Combined: 3, Props: map[string]string{
		"listener.security.protocol.map":       "PLAINTEXT:SASL_SSL,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":              "PLAIN",
		"sasl.mechanism.inter.broker.protocol": "PLAIN",
		"listener.name.plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
			`username="broker" password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";`,
		"ssl.keystore.type":          "PEM",
		"ssl.keystore.location":      server.KeystorePEM,
		"ssl.truststore.type":        "PEM",
		"ssl.truststore.location":    ca.PEMFile,
		"default.replication.factor": "3",
	}})
	for _, n := range c.Nodes {
		n.Spawn()
	}
	for _, n := range c.Nodes {
		n.WaitServing()
	}
	cl := c.Client([]string{c.Nodes[0].Addr}, kgo.DialTLSConfig(ca.ClientTLS(nil)),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	minISR := "3"
	clustertest.Eventually(t, time.Minute, func() (bool, string) {
		resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &minISR}, "replicated")
		if err == nil {
			err = resp.Err
		}
		return err == nil, "CreateTopics replicated: " + errString(err)
	})
	// Every acks=all write waits for the three replicas' fetchers (minimum ISR 3).
	p := c.Client([]string{c.Nodes[0].Addr}, kgo.DialTLSConfig(ca.ClientTLS(nil)),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.DefaultProduceTopic("replicated"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := 0; i < 20; i++ {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d: %v", i, err)
		}
	}
	td, err := adm.ListTopics(ctx, "replicated")
	if err != nil {
		t.Fatal(err)
	}
	part := td["replicated"].Partitions[0]
	if len(part.Replicas) != 3 || len(part.ISR) != 3 {
		t.Fatalf("replicated-0: replicas %v, ISR %v; want three of each", part.Replicas, part.ISR)
	}
	co := c.Client([]string{c.Nodes[0].Addr}, kgo.DialTLSConfig(ca.ClientTLS(nil)),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.ConsumeTopics("replicated"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n := 0
	for n < 20 {
		fs := co.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 20 records back", n)
		}
		n += len(fs.Records())
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
