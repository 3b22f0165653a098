package security

import (
	"strings"
	"testing"
)

// TestPrincipalMapper: Kafka's SslPrincipalMapper rules (the examples of Kafka's docs
// and tests): the first matching rule maps, $N references groups, /L and /U change case,
// DEFAULT keeps the DN, no matching rule is an error, and a malformed rule is refused.
func TestPrincipalMapper(t *testing.T) {
	m, err := NewPrincipalMapper(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,
		RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,
		RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,
		DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=kafka-server1,OU=ServiceUsers,O=Org,C=UK": "kafka-server1",
		"CN=Duke,OU=JavaSoft,O=Sun,L=SC,ST=CA,C=US":   "duke@javasoft",
		"OU=x,cn=client.example":                      "CLIENT.EXAMPLE",
		"OU=nobody":                                   "OU=nobody",
	} {
		if got, err := m.Name(dn); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", dn, got, err, want)
		}
	}
	strict, err := NewPrincipalMapper(`RULE:^CN=([^,]*)$/$1/`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strict.Name("CN=a,O=b"); err == nil || !strings.Contains(err.Error(), "no ssl.principal.mapping.rules rule matches") {
		t.Fatalf("unmatched DN: %v", err)
	}
	if _, err := NewPrincipalMapper(`RULE:^CN=(.*)$`); err == nil {
		t.Fatal("a rule without replacement was accepted")
	}
}

// TestParseJAAS: login module, control flag, quoted (with escapes) and bare options, the
// PLAIN users; a missing ';', a bad flag and a second module are refused without
// quoting values.
func TestParseJAAS(t *testing.T) {
	j, err := ParseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="a\"dmin" user_admin="a\"dmin" user_alice=alice-secret;`)
	if err != nil {
		t.Fatal(err)
	}
	if u, p := j.Credentials(); u != "admin" || p != `a"dmin` {
		t.Fatalf("credentials %q %q", u, p)
	}
	if users := j.PlainUsers(); len(users) != 2 || users["admin"] != `a"dmin` || users["alice"] != "alice-secret" {
		t.Fatalf("users %v", users)
	}
	for _, bad := range []string{
		`org.Module required password="s3cret"`,
		`org.Module maybe password="s3cret";`,
		`org.Module required password="s3cret"; org.Other required;`,
		`org.Module required password="s3cret;`,
	} {
		_, err := ParseJAAS(bad)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
