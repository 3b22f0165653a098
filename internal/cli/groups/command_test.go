package groupscli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The command is tested against franz-go's kfake cluster over real sockets (the kmirror
// broker's own end-to-end tests run it against kmirror).
func cluster(t *testing.T) (string, *kadm.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Topic: "t", Partition: int32(i % 2), Value: []byte("v")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return addr, kadm.NewClient(cl)
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestGroupsCommand(t *testing.T) {
	addr, adm := cluster(t)
	ctx := context.Background()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 2, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "t", Partition: 1, At: 4, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}

	out, err := run(t, "list", "--bootstrap-server", addr)
	if err != nil || strings.TrimSpace(out) != "g" {
		t.Fatalf("list: %q %v", out, err)
	}
	out, err = run(t, "describe", "g", "--bootstrap-server", addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"has no active members", "CURRENT-OFFSET", "g      t      0          2               5               3    -"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe output lacks %q:\n%s", want, out)
		}
	}

	// Dry run by default: the plan is printed, nothing is committed.
	out, err = run(t, "reset-offsets", "g", "--topic", "t", "--to-earliest", "--bootstrap-server", addr)
	if err != nil || !strings.Contains(out, "Dry run") || !strings.Contains(out, "g      t      0          0") {
		t.Fatalf("dry run: %q %v", out, err)
	}
	fetched, _ := adm.FetchOffsets(ctx, "g")
	if o, _ := fetched.Lookup("t", 0); o.At != 2 {
		t.Fatalf("dry run committed: %d", o.At)
	}
	if _, err = run(t, "reset-offsets", "g", "--topic", "t:1", "--to-offset", "99", "--execute", "--bootstrap-server", addr); err != nil {
		t.Fatal(err)
	}
	fetched, _ = adm.FetchOffsets(ctx, "g")
	if o0, _ := fetched.Lookup("t", 0); o0.At != 2 {
		t.Fatalf("partition 0 changed: %d", o0.At)
	}
	if o1, _ := fetched.Lookup("t", 1); o1.At != 5 {
		t.Fatalf("partition 1: %d, want 5 (clamped to the end offset)", o1.At)
	}
	if _, err = run(t, "reset-offsets", "g", "--topic", "t", "--to-datetime", time.Now().Add(time.Hour).Format("2006-01-02T15:04:05.000"), "--execute", "--bootstrap-server", addr); err != nil {
		t.Fatal(err)
	}

	out, err = run(t, "delete", "g", "--bootstrap-server", addr)
	if err != nil || !strings.Contains(out, "was successful") {
		t.Fatalf("delete: %q %v", out, err)
	}
	if _, err = run(t, "delete", "g", "--bootstrap-server", addr); err == nil {
		t.Fatal("deleting an absent group succeeded")
	}
}

func TestResetRefusedForActiveGroup(t *testing.T) {
	addr, _ := cluster(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("active"), kgo.ConsumeTopics("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("consumer did not consume before the deadline")
		}
		if fs.NumRecords() > 0 {
			break
		}
	}
	_, err = run(t, "reset-offsets", "active", "--topic", "t", "--to-latest", "--execute", "--bootstrap-server", addr)
	if err == nil || !strings.Contains(err.Error(), "inactive") {
		t.Fatalf("reset of an active group: %v", err)
	}
	out, err := run(t, "describe", "active", "--bootstrap-server", addr)
	if err != nil || !strings.Contains(out, "t(0,1)") {
		t.Fatalf("describe active: %q %v", out, err)
	}
}

// TestDescribeFlagsOffsetBeyondLogEnd: a committed offset past the log end offset (a
// truncated or recreated topic) shows as a negative LAG, as in Kafka's
// ConsumerGroupCommand, and is named in a warning instead of passing for LAG 0.
func TestDescribeFlagsOffsetBeyondLogEnd(t *testing.T) {
	addr, adm := cluster(t)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 5, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "t", Partition: 1, At: 50, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(context.Background(), "ahead", offs); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "describe", "ahead", "--bootstrap-server", addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ahead  t      0          5               5               0    -", "ahead  t      1          50              5               -45  -",
		"Warning: the committed offset is beyond the log end offset (negative LAG) on t-1:"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe output lacks %q:\n%s", want, out)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"list", "--command-config", filepath.Join(t.TempDir(), "absent.properties")},
		{"reset-offsets", "g", "--topic", "t", "--bootstrap-server", "x:1"},
		{"reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest", "--bootstrap-server", "x:1"},
		{"reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday", "--bootstrap-server", "x:1"},
		{"reset-offsets", "g", "--topic", "t:x", "--to-earliest", "--bootstrap-server", "x:1"},
		{"describe", "--bootstrap-server", "x:1"},
		{"list", "--bogus", "--bootstrap-server", "x:1"},
	} {
		out, err := run(t, args...)
		if err == nil {
			t.Errorf("%v: no error", args)
		} else if strings.Contains(err.Error(), "\n") || out != "" {
			t.Errorf("%v: want one line and no output, got %q / %q", args, err, out)
		}
	}
}
