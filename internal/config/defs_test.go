package config

import "testing"

// TestClusterDefaults pins the clustering and replication keys to Apache Kafka 4.x's
// names, types and defaults (KRaftConfigs, QuorumConfig, SocketServerConfigs,
// ReplicationConfigs, ServerLogConfigs, GroupCoordinatorConfig, TransactionLogConfig).
func TestClusterDefaults(t *testing.T) {
	cases := []struct {
		set       Set
		name      string
		typ       Type
		def       string
		noDefault bool
	}{
		{Broker, "process.roles", TypeList, "", false},
		{Broker, "controller.quorum.voters", TypeList, "", false},
		{Broker, "controller.listener.names", TypeList, "", true},
		{Broker, "listener.security.protocol.map", TypeString, "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", false},
		{Broker, "inter.broker.listener.name", TypeString, "", true},
		{Broker, "broker.rack", TypeString, "", true},
		{Broker, "broker.session.timeout.ms", TypeInt, "9000", false},
		{Broker, "broker.heartbeat.interval.ms", TypeInt, "2000", false},
		{Broker, "controller.quorum.election.timeout.ms", TypeInt, "1000", false},
		{Broker, "controller.quorum.fetch.timeout.ms", TypeInt, "2000", false},
		{Broker, "offsets.topic.replication.factor", TypeShort, "3", false},
		{Broker, "transaction.state.log.replication.factor", TypeShort, "3", false},
		{Broker, "transaction.state.log.min.isr", TypeInt, "2", false},
		{Broker, "min.insync.replicas", TypeInt, "1", false},
		{Broker, "unclean.leader.election.enable", TypeBoolean, "false", false},
		{Broker, "auto.leader.rebalance.enable", TypeBoolean, "true", false},
		{Broker, "leader.imbalance.check.interval.seconds", TypeLong, "300", false},
		{Broker, "replica.lag.time.max.ms", TypeLong, "30000", false},
		{Broker, "replica.fetch.max.bytes", TypeInt, "1048576", false},
		{Broker, "replica.fetch.response.max.bytes", TypeInt, "10485760", false},
		{Broker, "replica.fetch.wait.max.ms", TypeInt, "500", false},
		{Broker, "replica.fetch.min.bytes", TypeInt, "1", false},
		{Broker, "replica.fetch.backoff.ms", TypeInt, "1000", false},
		{Broker, "num.replica.fetchers", TypeInt, "1", false},
		{Broker, "replica.high.watermark.checkpoint.interval.ms", TypeLong, "5000", false},
		{Broker, "producer.id.expiration.ms", TypeInt, "86400000", false},
		{Topic, "min.insync.replicas", TypeInt, "1", false},
		{Topic, "unclean.leader.election.enable", TypeBoolean, "false", false},
	}
	for _, c := range cases {
		d := c.set[c.name]
		if d == nil {
			t.Errorf("%s is not defined", c.name)
			continue
		}
		if d.Type != c.typ || d.Default != c.def || d.NoDefault != c.noDefault {
			t.Errorf("%s: type %d default %q (none %v), want type %d default %q (none %v)", c.name, d.Type, d.Default, d.NoDefault, c.typ, c.def, c.noDefault)
		}
		if d.Doc == "" {
			t.Errorf("%s has no doc", c.name)
		}
	}
	for _, name := range []string{"min.insync.replicas", "unclean.leader.election.enable"} {
		if s := Topic[name].Synonym; s != name || Broker[s] == nil {
			t.Errorf("topic %s: synonym %q, want the broker key %s", name, s, name)
		}
	}
}

// TestListValidation checks list keys with allowed values: an empty value is the empty
// list for a key whose default is empty, and every element must be allowed.
func TestListValidation(t *testing.T) {
	for _, ok := range []string{"", "broker", "controller", "broker,controller", " broker , controller "} {
		if _, err := NewValues(Broker, map[string]string{"process.roles": ok}, false); err != nil {
			t.Errorf("process.roles=%q: %v", ok, err)
		}
	}
	want := `invalid value "broker,zookeeper" for configuration process.roles: allowed values are broker, controller`
	if _, err := NewValues(Broker, map[string]string{"process.roles": "broker,zookeeper"}, false); err == nil || err.Error() != want {
		t.Errorf("process.roles=broker,zookeeper: %v, want %s", err, want)
	}
	if _, err := NewValues(Topic, map[string]string{"cleanup.policy": ""}, true); err == nil {
		t.Error("cleanup.policy= (its default is delete) was accepted")
	}
	if _, err := NewValues(Topic, map[string]string{"min.insync.replicas": "0"}, true); err == nil {
		t.Error("topic min.insync.replicas=0 was accepted (Kafka: at least 1)")
	}
}
