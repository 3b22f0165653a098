package mirrorscli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// describeMirrorConfigs reads the CLUSTER_MIRROR resource (type 64) of mirror on b with
// a raw DescribeConfigs: name -> entry.
func describeMirrorConfigs(t *testing.T, b *brokertest.Broker, mirror string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceType(mirrorproto.ConfigResourceTypeClusterMirror), mirror
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), b.Client())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("DescribeConfigs: %+v", resp.Resources)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// produce writes records key-from..key-to to topic on b.
func produce(t *testing.T, b *brokertest.Broker, topic string, from, to int) {
	t.Helper()
	cl := b.Client()
	for i := from; i <= to; i++ {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint("key-", i)), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// waitRecords consumes topic on b from the start until it holds n records (30 s).
func waitRecords(t *testing.T, b *brokertest.Broker, topic string, n int) {
	t.Helper()
	cl := b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s on the destination: %d records after 30 s, want %d", topic, got, n)
		}
		fs.EachRecord(func(*kgo.Record) { got++ })
	}
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.properties")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAlterMirrorConfigs changes a running mirror's configs with --alter between two real
// brokers: fetch.max.bytes (through its first-draft alias), bootstrap.servers (the same
// source written as localhost) and a secret, checks them with DescribeConfigs on resource
// type 64, that records produced afterwards are still mirrored, that --delete-config
// restores the default, that secrets are never printed, and the one-line errors.
func TestAlterMirrorConfigs(t *testing.T) {
	src := brokertest.Start(t, nil)
	dst := brokertest.Start(t, nil)
	ctx := context.Background()
	if _, err := kadm.NewClient(src.Client()).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produce(t, src, "orders", 1, 5)
	run := func(args ...string) (string, string, error) {
		return runCmd(t, append([]string{"--bootstrap-server", dst.Addr()}, args...)...)
	}
	if _, errOut, err := run("--create", "--mirror", "m", "--mirror-config", writeFile(t, "bootstrap.servers="+src.Addr()+"\n")); err != nil {
		t.Fatalf("--create: %v %s", err, errOut)
	}
	if _, errOut, err := run("--start", "--mirror", "m", "--topics", "orders"); err != nil {
		t.Fatalf("--start: %v %s", err, errOut)
	}
	waitRecords(t, dst, "orders", 5)

	_, port, _ := strings.Cut(src.Addr(), ":")
	newAddr := "localhost:" + port
	const secret = "s3cret-rotated"
	path := writeFile(t, "bootstrap.servers="+newAddr+"\nmirror.fetch.max.bytes=2048\nsasl.password="+secret+"\n")
	out, errOut, err := run("--alter", "--mirror", "m", "--mirror-config", path)
	if err != nil {
		t.Fatalf("--alter: %v %s", err, errOut)
	}
	want := "Set bootstrap.servers of mirror m to " + newAddr + " (was " + src.Addr() + ").\n" +
		"Set fetch.max.bytes of mirror m to 2048 (was the default 1048576).\n" +
		"Set sasl.password of mirror m (secret: value not shown).\n"
	if out != want || errOut != "" {
		t.Errorf("--alter stdout %q, stderr %q; want stdout %q", out, errOut, want)
	}
	cfgs := describeMirrorConfigs(t, dst, "m")
	if c := cfgs["fetch.max.bytes"]; c.Value == nil || *c.Value != "2048" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("fetch.max.bytes after --alter: %+v", c)
	}
	if c := cfgs["bootstrap.servers"]; c.Value == nil || *c.Value != newAddr {
		t.Errorf("bootstrap.servers after --alter: %+v", c)
	}
	if c := cfgs["sasl.password"]; c.Value != nil || !c.IsSensitive {
		t.Errorf("sasl.password after --alter: %+v", c)
	}
	produce(t, src, "orders", 6, 10)
	waitRecords(t, dst, "orders", 10) // the reconnected mirror still mirrors

	out, errOut, err = run("--describe", "--mirror", "m", "--configs")
	if err != nil || strings.Contains(out, secret) {
		t.Fatalf("--describe --configs: %v %q %q", err, out, errOut)
	}
	for _, line := range []string{"CONFIG ", "\nbootstrap.servers ", "\nfetch.max.bytes ", "\nsasl.password "} {
		if !strings.Contains(out, line) {
			t.Errorf("--describe --configs lacks %q:\n%s", line, out)
		}
	}
	for _, f := range [][]string{{"fetch.max.bytes", "SET", "2048"}, {"sasl.password", "SET", "(secret)"}, {"fetch.min.bytes", "DEFAULT", "1"}, {"topics.include", "DEFAULT", `""`}, {"source.cluster.id", "SET,READ-ONLY", src.ClusterID()}} {
		if !strings.Contains(out, "\n"+f[0]) || !hasFields(out, f...) {
			t.Errorf("--describe --configs lacks the row %v:\n%s", f, out)
		}
	}

	out, _, err = run("--describe", "--mirror", "m", "--configs", "--json")
	var entries []ConfigEntry
	if err != nil || json.Unmarshal([]byte(out), &entries) != nil || strings.Contains(out, secret) {
		t.Fatalf("--configs --json: %v %s", err, out)
	}
	for _, e := range entries {
		if e.Name == "sasl.password" && (e.Value != nil || !e.Sensitive || e.Source != "SET") {
			t.Errorf("--configs --json sasl.password: %+v", e)
		}
	}

	out, errOut, err = run("--alter", "--mirror", "m", "--delete-config", "fetch.max.bytes,sasl.password,fetch.min.bytes")
	if err != nil {
		t.Fatalf("--delete-config: %v %s", err, errOut)
	}
	want = "Removed fetch.max.bytes of mirror m: the default 1048576 applies (was 2048).\n" +
		"Removed sasl.password of mirror m.\n" +
		"fetch.min.bytes of mirror m was not set: nothing removed.\n"
	if out != want {
		t.Errorf("--delete-config stdout %q, want %q", out, want)
	}
	cfgs = describeMirrorConfigs(t, dst, "m")
	if c := cfgs["fetch.max.bytes"]; c.Value == nil || *c.Value != "1048576" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("fetch.max.bytes after --delete-config: %+v", c)
	}
	if _, ok := cfgs["sasl.password"]; ok {
		t.Errorf("sasl.password still set after --delete-config")
	}

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown mirror", []string{"--alter", "--mirror", "nope", "--delete-config", "fetch.max.bytes"}, "Error: UNKNOWN_CLUSTER_MIRROR: cluster mirror nope does not exist\n"},
		{"unknown mirror configs", []string{"--describe", "--mirror", "nope", "--configs"}, "Error: UNKNOWN_CLUSTER_MIRROR: cluster mirror nope does not exist\n"},
		{"invalid value", []string{"--alter", "--mirror", "m", "--mirror-config", writeFile(t, "fetch.max.bytes=0\n")}, "Error: INVALID_CONFIG: invalid value \"0\" for configuration fetch.max.bytes: value must be between 1 and 2147483647\n"},
		{"required key", []string{"--alter", "--mirror", "m", "--delete-config", "bootstrap.servers"}, "Error: INVALID_CONFIG: bootstrap.servers is required\n"},
		{"set and removed", []string{"--alter", "--mirror", "m", "--mirror-config", writeFile(t, "mirror.fetch.max.bytes=1\n"), "--delete-config", "fetch.max.bytes"},
			"Error: fetch.max.bytes is both set by --mirror-config (as mirror.fetch.max.bytes) and removed by --delete-config\n"},
		{"read-only key", []string{"--alter", "--mirror", "m", "--mirror-config", writeFile(t, "source.cluster.id=x\n")}, "Error: INVALID_CONFIG: source.cluster.id is read-only\n"},
	} {
		out, errOut, err := run(c.args...)
		if err == nil || out != "" || !strings.HasPrefix(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%s: err %v, stdout %q, stderr %q, want %q", c.name, err, out, errOut, c.want)
		}
	}
	if c := describeMirrorConfigs(t, dst, "m")["fetch.max.bytes"]; c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("a refused --alter changed fetch.max.bytes: %+v", c)
	}
}

// hasFields reports whether a line of out has exactly the whitespace-separated fields.
func hasFields(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}
