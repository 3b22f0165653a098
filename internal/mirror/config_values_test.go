package mirror

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// TestMirrorConfigNumericRanges checks every numeric mirror config: a value out of its
// range or not a number is refused with one line naming the key, the value and the range,
// and the range's ends are accepted.
func TestMirrorConfigNumericRanges(t *testing.T) {
	var numeric []string
	for _, n := range config.Mirror.Names() {
		switch config.Mirror[n].Type {
		case config.TypeInt, config.TypeShort, config.TypeLong:
			numeric = append(numeric, n)
		}
	}
	if len(numeric) < 6 {
		t.Fatalf("numeric mirror configs %v: expected at least the six of spec section 11", numeric)
	}
	for _, name := range numeric {
		lo, hi := config.Mirror[name].IntRange()
		rng := fmt.Sprintf("between %d and %d", lo, hi)
		for _, bad := range []string{fmt.Sprint(lo - 1), fmt.Sprint(hi + 1), "-5", "abc", "1.5"} {
			if bad == "-5" && lo <= -5 {
				continue
			}
			_, err := parseMirrorConfig(map[string]string{cfgBootstrap: "src:9092", name: bad})
			if err == nil {
				t.Errorf("%s=%s accepted", name, bad)
				continue
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, name) || !strings.Contains(msg, fmt.Sprintf("%q", bad)) || !strings.Contains(msg, rng) {
				t.Errorf("%s=%s: %q does not name the key, the value and the range %q", name, bad, msg, rng)
			}
		}
		for _, ok := range []int64{lo, hi} {
			if _, err := parseMirrorConfig(map[string]string{cfgBootstrap: "src:9092", name: fmt.Sprint(ok)}); err != nil {
				t.Errorf("%s=%d refused: %v", name, ok, err)
			}
		}
	}
	if lo, _ := config.Mirror[cfgFetchMaxBytes].IntRange(); lo != 1 {
		t.Errorf("fetch.max.bytes lower bound %d, want 1", lo)
	}
}

// TestCreateMirrorRangeMessage sends the tester's fetch.max.bytes=-5 to a real mirror
// manager: INVALID_CONFIG with the range, before any source connection.
func TestCreateMirrorRangeMessage(t *testing.T) {
	e := newEnv(t)
	resp := e.m.CreateClusterMirror(ctxT(t), &mirrorproto.CreateClusterMirrorRequest{MirrorName: "m",
		Config: []mirrorproto.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: "127.0.0.1:1"}, {Name: "mirror.fetch.max.bytes", Value: "-5"}}})
	want := `invalid value "-5" for configuration fetch.max.bytes: value must be between 1 and 2147483647`
	if resp.ErrorCode != kerr.InvalidConfig.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != want {
		t.Fatalf("error %d %v, want INVALID_CONFIG %q", resp.ErrorCode, mirrorproto.ErrorFor(resp.ErrorCode, resp.ErrorMessage), want)
	}
}

// TestMirrorConfigValuesTrimmed checks Kafka's ConfigDef.parseType treatment of mirror
// config values: trimmed, LIST values split on commas with the whitespace around them and
// empty entries dropped, secrets changed in nothing but their surrounding whitespace.
func TestMirrorConfigValuesTrimmed(t *testing.T) {
	raw := map[string]string{
		cfgBootstrap:                            " a:9092 , b:9092, ",
		cfgTopicsExclude:                        "__.* ,tmp\\..*,,",
		cfgFetchMaxBytes:                        " 2048 ",
		cfgSecurityProtocol:                     "PLAINTEXT ",
		cfgSASLPassword:                         "  p a ss\t ",
		cfgStartOffset:                          "latest\t",
		"ssl.unknown.key":                       " kept as given ",
		"ssl.endpoint.identification.algorithm": " ",
	}
	c, err := parseMirrorConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		cfgBootstrap:                            "a:9092,b:9092",
		cfgTopicsExclude:                        "__.*,tmp\\..*",
		cfgFetchMaxBytes:                        "2048",
		cfgSecurityProtocol:                     "PLAINTEXT",
		cfgSASLPassword:                         "p a ss",
		cfgStartOffset:                          "latest",
		"ssl.unknown.key":                       " kept as given ",
		"ssl.endpoint.identification.algorithm": "",
	}
	for k, w := range want {
		if raw[k] != w {
			t.Errorf("%s = %q, want %q", k, raw[k], w)
		}
	}
	if strings.Join(c.bootstrap, ",") != "a:9092,b:9092" || len(c.exclude) != 2 || c.fetchMaxBytes != 2048 {
		t.Errorf("parsed bootstrap %q, %d exclude patterns, fetch.max.bytes %d", c.bootstrap, len(c.exclude), c.fetchMaxBytes)
	}
}

// TestMirrorConfigStoredTrimmed creates a mirror on a real manager from a kfake source with
// the tester's `bootstrap.servers = HOST:PORT ` and a trailing comma in a list, then alters
// it: the metadata record and DescribeConfigs hold the trimmed values.
func TestMirrorConfigStoredTrimmed(t *testing.T) {
	c, _ := newKfake(t)
	addr := c.ListenAddrs()[0]
	e := newEnv(t)
	e.createMirror("m", addr+" ", "topics.exclude", "__.*, tmp.* ,", "mirror.sasl.password", " secret with inner space ")
	check := func(when string, want map[string]string) {
		t.Helper()
		stored := e.local.Metadata().Image().Mirrors["m"].Configs
		described := map[string]string{}
		cfgs, err := e.m.DescribeMirrorConfigs(ctxT(e.t), "m")
		if err != nil {
			t.Fatal(err)
		}
		for _, cf := range cfgs {
			if cf.Value != nil {
				described[cf.Name] = *cf.Value
			}
		}
		for k, w := range want {
			if stored[k] != w {
				t.Errorf("%s: stored %s = %q, want %q", when, k, stored[k], w)
			}
			if !config.MirrorSecret(k) && described[k] != w {
				t.Errorf("%s: described %s = %q, want %q", when, k, described[k], w)
			}
		}
	}
	check("create", map[string]string{cfgBootstrap: addr, cfgTopicsExclude: "__.*,tmp.*", cfgSASLPassword: "secret with inner space"})
	set := func(n, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		return kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: n, Op: kmsg.IncrementalAlterConfigOpSet, Value: &v}
	}
	if err := e.m.AlterMirrorConfigs(ctxT(t), "m", []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		set("fetch.wait.max.ms", " 250 "), set("groups.exclude", " , g1 ,g2, "),
	}, false); err != nil {
		t.Fatal(err)
	}
	check("alter", map[string]string{cfgBootstrap: addr, "fetch.wait.max.ms": "250", cfgGroupsExclude: "g1,g2"})
}

// TestDynamicMirrorKeysAreDynamicBrokerKeys: every mirror.* broker key the manager
// overlays from the dynamic broker configs is one the broker lets AlterConfigs change
// (config.Def.Dynamic); one missing would be refused as read-only.
func TestDynamicMirrorKeysAreDynamicBrokerKeys(t *testing.T) {
	for name := range brokerConfigNames {
		if !config.IsDynamicBrokerKey(name) {
			t.Errorf("%s is applied dynamically by the mirror manager but not marked Dynamic in internal/config", name)
		}
	}
}
