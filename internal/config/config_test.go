package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRetentionAndRollPrecedence checks Kafka's KafkaConfig precedence: log.retention.ms >
// log.retention.minutes > log.retention.hours, log.roll.ms > log.roll.hours, and that a
// negative retention reads as -1 (unlimited).
func TestRetentionAndRollPrecedence(t *testing.T) {
	cases := []struct {
		name              string
		set               map[string]string
		retention, roll   string
		retentionExplicit bool
	}{
		{"defaults", nil, "604800000", "604800000", false},
		{"hours", map[string]string{"log.retention.hours": "1", "log.roll.hours": "2"}, "3600000", "7200000", true},
		{"minutes over hours", map[string]string{"log.retention.hours": "1", "log.retention.minutes": "5"}, "300000", "604800000", true},
		{"ms over minutes and hours", map[string]string{"log.retention.hours": "1", "log.retention.minutes": "5", "log.retention.ms": "1234", "log.roll.hours": "2", "log.roll.ms": "999"}, "1234", "999", true},
		{"ms -1 is unlimited", map[string]string{"log.retention.ms": "-1", "log.retention.hours": "1"}, "-1", "604800000", true},
		{"negative hours are unlimited", map[string]string{"log.retention.hours": "-1"}, "-1", "604800000", true},
		{"negative ms is unlimited", map[string]string{"log.retention.ms": "-5"}, "-1", "604800000", true},
		{"surrounding spaces", map[string]string{"log.retention.hours": " 24 "}, "86400000", "604800000", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := NewValues(Broker, c.set, false)
			if err != nil {
				t.Fatal(err)
			}
			if got, explicit := v.Get("log.retention.ms"); got != c.retention || explicit != c.retentionExplicit {
				t.Errorf("log.retention.ms = %q (set %v), want %q (set %v)", got, explicit, c.retention, c.retentionExplicit)
			}
			if got := v.String("log.roll.ms"); got != c.roll {
				t.Errorf("log.roll.ms = %q, want %q", got, c.roll)
			}
			if _, ok := v.Explicit()["log.retention.ms"]; ok != (c.set["log.retention.ms"] != "") {
				t.Errorf("Explicit() = %v: log.retention.ms listed %v", v.Explicit(), ok)
			}
		})
	}
}

// TestRetentionRefusesZero checks KafkaConfig's rule that the resolved log.retention.ms
// is -1 or at least 1, with an error naming the key that was set.
func TestRetentionRefusesZero(t *testing.T) {
	for _, key := range []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"} {
		_, err := NewValues(Broker, map[string]string{key: "0"}, false)
		want := `invalid value "0" for configuration ` + key + `: log.retention.ms must be unlimited (-1) or at least 1`
		if err == nil || err.Error() != want {
			t.Errorf("%s=0: err %v, want %s", key, err, want)
		}
	}
	if _, err := NewValues(Broker, map[string]string{"log.roll.hours": "0"}, false); err == nil || !strings.Contains(err.Error(), "log.roll.hours") {
		t.Errorf("log.roll.hours=0: err %v", err)
	}
}

// TestStockServerPropertiesRetention reads the log lines of Apache Kafka's stock
// config/server.properties: log.retention.hours is a known key and sets the retention.
func TestStockServerPropertiesRetention(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	stock := `############################# Log Retention Policy #############################
# The minimum age of a log file to be eligible for deletion due to age
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
`
	if err := os.WriteFile(path, []byte(strings.Replace(stock, "=168", "=48", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	props, err := ReadProperties(path)
	if err != nil {
		t.Fatal(err)
	}
	for k := range props {
		if Broker[k] == nil {
			t.Errorf("%s is not a known broker key", k)
		}
	}
	v, err := NewValues(Broker, props, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Int64("log.retention.ms"); got != 48*3600*1000 {
		t.Errorf("log.retention.ms = %d, want 48 hours", got)
	}
}

// TestValidateNamesRange checks that an integer error names the key, the value and the
// allowed range, the type's own limits included for INT and SHORT.
func TestValidateNamesRange(t *testing.T) {
	cases := []struct {
		set  Set
		key  string
		val  string
		want string
	}{
		{Broker, "num.partitions", "0", `invalid value "0" for configuration num.partitions: value must be between 1 and 2147483647`},
		{Broker, "num.partitions", "3000000000", `invalid value "3000000000" for configuration num.partitions: value must be between 1 and 2147483647`},
		{Broker, "num.partitions", "x", `invalid value "x" for configuration num.partitions: expected an integer between 1 and 2147483647`},
		{Broker, "default.replication.factor", "40000", `invalid value "40000" for configuration default.replication.factor: value must be between 1 and 32767`},
		{Broker, "mirror.metadata.refresh.interval.ms", "0", `invalid value "0" for configuration mirror.metadata.refresh.interval.ms: value must be between 1 and 86400000`},
		{Broker, "log.flush.interval.messages", "0", `invalid value "0" for configuration log.flush.interval.messages: value must be at least 1`},
		{Broker, "log.retention.ms", "forever", `invalid value "forever" for configuration log.retention.ms: expected an integer`},
		{Mirror, "fetch.max.bytes", " -5 ", `invalid value "-5" for configuration fetch.max.bytes: value must be between 1 and 2147483647`},
		{Topic, "segment.bytes", "13", `invalid value "13" for configuration segment.bytes: value must be between 14 and 2147483647`},
	}
	for _, c := range cases {
		err := c.set[c.key].Validate(c.val)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s=%q: %v, want %s", c.key, c.val, err, c.want)
		}
	}
	for _, ok := range []string{"1", "2147483647"} {
		if err := Broker["num.partitions"].Validate(ok); err != nil {
			t.Errorf("num.partitions=%s: %v", ok, err)
		}
	}
}

// TestMirrorName checks the canonical spelling and the known flag of mirror config names.
func TestMirrorName(t *testing.T) {
	cases := []struct {
		in, want string
		known    bool
	}{
		{"fetch.max.bytes", "fetch.max.bytes", true},
		{" mirror.fetch.max.bytes ", "fetch.max.bytes", true},
		{"mirror.ssl.keystore.key", "ssl.keystore.key", true},
		{"mirror.ssl.truststore.locaton", "ssl.truststore.locaton", false},
		{"fech.max.bytes", "fech.max.bytes", false},
		{"mirror.fech.max.bytes", "mirror.fech.max.bytes", false},
	}
	for _, c := range cases {
		if got, known := MirrorName(c.in); got != c.want || known != c.known {
			t.Errorf("MirrorName(%q) = %q, %v; want %q, %v", c.in, got, known, c.want, c.known)
		}
	}
}

// TestIsKnownBrokerKey: per-listener keys (Kafka's listener.name.<listener>.<key>, and
// the SASL mechanism's jaas config) are known, so serve does not warn about them.
func TestIsKnownBrokerKey(t *testing.T) {
	for k, want := range map[string]bool{
		"log.dirs": true,
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": true,
		"listener.name.ssl.ssl.keystore.location":               true,
		"listener.name.ssl.no.such.key":                         false,
		"listener.name.x":                                       false,
		"no.such.key":                                           false,
	} {
		if got := IsKnownBrokerKey(k); got != want {
			t.Errorf("IsKnownBrokerKey(%q) = %v, want %v", k, got, want)
		}
	}
}
