package topicscli

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// run runs `topics args... --bootstrap-server addr` in-process: stdout and the error.
func run(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(args, "--bootstrap-server", addr))
	err := cmd.Execute()
	return out.String(), err
}

// TestTopicsCommand creates, lists, describes, alters the configs of and deletes a topic
// on a real broker, and checks the Kafka errors of a duplicate create and an absent
// delete.
func TestTopicsCommand(t *testing.T) {
	addr := brokertest.Start(t, nil).Addr()
	out, err := run(t, addr, "create", "tt", "-p", "4", "-r", "1", "--config", "retention.ms=3600000")
	if err != nil || !strings.Contains(out, "Created topic tt.") {
		t.Fatalf("create: %q %v", out, err)
	}
	if _, err := run(t, addr, "create", "tt", "--partitions", "2"); err == nil || !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("create again: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if _, err := run(t, addr, "create", "tt", "--if-not-exists"); err != nil {
		t.Fatalf("create --if-not-exists: %v", err)
	}
	if out, err := run(t, addr, "list"); err != nil || !regexp.MustCompile(`(?m)^tt$`).MatchString(out) {
		t.Fatalf("list: %q %v", out, err)
	}
	out, err = run(t, addr, "describe", "tt")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`Topic: tt\tTopicId: \S+\tPartitionCount: 4\tReplicationFactor: 1\tConfigs: retention.ms=3600000\n`).MatchString(out) {
		t.Errorf("describe header:\n%s", out)
	}
	if rows := regexp.MustCompile(`(?m)^\tTopic: tt\tPartition: [0-3]\tLeader: 1\tReplicas: 1\tIsr: 1$`).FindAllString(out, -1); len(rows) != 4 {
		t.Errorf("describe: %d partition rows, want 4:\n%s", len(rows), out)
	}
	if _, err := run(t, addr, "alter-config", "tt", "--config", "cleanup.policy=compact", "--delete-config", "retention.ms"); err != nil {
		t.Fatalf("alter-config: %v", err)
	}
	if out, _ := run(t, addr, "describe", "tt"); !strings.Contains(out, "Configs: cleanup.policy=compact\n") {
		t.Errorf("describe after alter-config:\n%s", out)
	}
	if _, err := run(t, addr, "alter-config", "tt"); err == nil || !strings.Contains(err.Error(), "nothing to alter") {
		t.Errorf("alter-config without a change: %v", err)
	}
	if out, err := run(t, addr, "delete", "tt"); err != nil || !strings.Contains(out, "Deleted topic tt.") {
		t.Fatalf("delete: %q %v", out, err)
	}
	if out, _ := run(t, addr, "list"); regexp.MustCompile(`(?m)^tt$`).MatchString(out) {
		t.Errorf("list after delete still shows tt:\n%s", out)
	}
	if _, err := run(t, addr, "delete", "tt"); err == nil || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("delete of an absent topic: %v", err)
	}
	if _, err := run(t, addr, "create", "bad", "--config", "novalue"); err == nil || !strings.Contains(err.Error(), "expected key=value") {
		t.Errorf("--config without =: %v", err)
	}
}
