package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	mirrorscli "github.com/kmirror/kmirror/internal/cli/mirrors"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metadata"
)

// runKmirror runs `kmirror args...` in-process and returns its output and error.
func runKmirror(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "kmirror", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newStorageCommand())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// writeConfig writes a server.properties for node nodeID of a three-controller cluster
// (combined roles) with its data in dir/data, and returns its path.
func writeConfig(t *testing.T, dir string, nodeID string, extra ...string) string {
	t.Helper()
	lines := []string{
		"process.roles=broker,controller",
		"node.id=" + nodeID,
		"controller.quorum.voters=1@localhost:9093,2@localhost:9193,3@localhost:9293",
		"listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
		"controller.listener.names=CONTROLLER",
		"log.dirs=" + filepath.Join(dir, "data"),
	}
	path := filepath.Join(dir, "server-"+nodeID+".properties")
	if err := os.WriteFile(path, []byte(strings.Join(append(lines, extra...), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStorageRandomUUID(t *testing.T) {
	out, err := runKmirror(t, "storage", "random-uuid")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSuffix(out, "\n")
	if got, err := config.ParseClusterID(id); err != nil || got != id || len(id) != 22 {
		t.Fatalf("random-uuid printed %q: %v", out, err)
	}
}

// TestStorageFormat formats a node's log directory, then checks Kafka's answers to a
// second format: already formatted, skipped with --ignore-formatted, and refused for
// another cluster or node even then. The broker's start-up check accepts the result.
func TestStorageFormat(t *testing.T) {
	tmp := t.TempDir()
	cfg := writeConfig(t, tmp, "1")
	data := filepath.Join(tmp, "data")
	const id = "MkU3OEVBNTcwNTJENDM2Qg"

	out, err := runKmirror(t, "storage", "format", "-t", id, "-c", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Formatted " + data + " with cluster.id " + id + ", node.id 1.\n"; out != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	m, err := config.ReadMetaProperties(data)
	if err != nil || m.Version != 1 || m.ClusterID != id || m.NodeID != 1 || len(m.DirectoryID) != 22 {
		t.Fatalf("meta.properties %+v, %v", m, err)
	}
	node := &config.Node{NodeID: 1}
	if got, err := config.CheckFormatted(data, node, id); err != nil || got != id {
		t.Fatalf("CheckFormatted: %q, %v", got, err)
	}

	_, err = runKmirror(t, "storage", "format", "--cluster-id", id, "--config", cfg)
	if want := "Log directory " + data + " is already formatted. Use --ignore-formatted to ignore this directory and format the others."; err == nil || err.Error() != want {
		t.Fatalf("second format: %v, want %s", err, want)
	}
	out, err = runKmirror(t, "storage", "format", "-t", id, "-c", cfg, "-g")
	if err != nil || out != "All of the log directories are already formatted.\n" {
		t.Fatalf("--ignore-formatted: %q, %v", out, err)
	}
	if again, _ := config.ReadMetaProperties(data); *again != *m {
		t.Fatalf("--ignore-formatted rewrote meta.properties: %+v, was %+v", again, m)
	}
	_, err = runKmirror(t, "storage", "format", "-t", "AAAAAAAAAAAAAAAAAAAAAg", "-c", cfg, "--ignore-formatted")
	if err == nil || !strings.HasPrefix(err.Error(), "Invalid cluster.id in: "+filepath.Join(data, "meta.properties")+". Expected AAAAAAAAAAAAAAAAAAAAAg, but read "+id) {
		t.Fatalf("another cluster ID: %v", err)
	}
	other := writeConfig(t, tmp, "2", "listeners=PLAINTEXT://localhost:9192,CONTROLLER://localhost:9193")
	_, err = runKmirror(t, "storage", "format", "-t", id, "-c", other, "-g")
	if err == nil || !strings.HasPrefix(err.Error(), "Stored node id 1 doesn't match previous node id 2 in ") {
		t.Fatalf("another node.id: %v", err)
	}
}

// TestStorageFormatRefuses checks the one-line errors of format before anything is written.
func TestStorageFormatRefuses(t *testing.T) {
	tmp := t.TempDir()
	good := writeConfig(t, tmp, "1")
	legacy := filepath.Join(tmp, "legacy.properties")
	if err := os.WriteFile(legacy, []byte("listeners=PLAINTEXT://localhost:9092\nlog.dirs="+filepath.Join(tmp, "data")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"bad cluster ID", []string{"-t", "my-cluster", "-c", good}, "Cluster ID string my-cluster does not appear to be a valid UUID: Input string `my-cluster` decoded as 7 bytes, which is not equal to the expected 16 bytes of a base64-encoded UUID"},
		{"reserved cluster ID", []string{"-t", "AAAAAAAAAAAAAAAAAAAAAA", "-c", good}, "cluster ID AAAAAAAAAAAAAAAAAAAAAA is a reserved UUID (Kafka's Uuid.RESERVED): use `kmirror storage random-uuid`"},
		{"legacy config", []string{"-t", "MkU3OEVBNTcwNTJENDM2Qg", "-c", legacy}, legacy + " has no process.roles: a node without process.roles and controller.quorum.voters formats its log directory itself on first start, so kmirror storage format is only for cluster nodes, or to bootstrap SCRAM credentials with --add-scram"},
		{"invalid config", []string{"-t", "MkU3OEVBNTcwNTJENDM2Qg", "-c", writeConfig(t, tmp, "4")}, "If process.roles contains the 'controller' role, the node id 4 must be included in the set of voters controller.quorum.voters=[1, 2, 3]"},
		{"two log dirs", []string{"-t", "MkU3OEVBNTcwNTJENDM2Qg", "-c", writeConfig(t, tmp, "3", "log.dirs=/a,/b", "listeners=PLAINTEXT://localhost:9292,CONTROLLER://localhost:9293")}, `log.dirs: kmirror uses one data directory, got "/a,/b"`},
		{"no config file", []string{"-t", "MkU3OEVBNTcwNTJENDM2Qg", "-c", filepath.Join(tmp, "missing.properties")}, "--config: open " + filepath.Join(tmp, "missing.properties") + ": no such file or directory"},
		{"no cluster ID", []string{"-c", good}, `required flag(s) "cluster-id" not set`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := runKmirror(t, append([]string{"storage", "format"}, c.args...)...)
			if err == nil || err.Error() != c.want {
				t.Fatalf("err %v\nwant %s", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(tmp, "data")); !os.IsNotExist(err) {
				t.Fatalf("data directory created: %v", err)
			}
		})
	}
}

// TestStorageInfo checks Kafka's kafka-storage info output and exit status.
func TestStorageInfo(t *testing.T) {
	tmp := t.TempDir()
	cfg := writeConfig(t, tmp, "1")
	data := filepath.Join(tmp, "data")
	out, err := runKmirror(t, "storage", "info", "-c", cfg)
	var exit *mirrorscli.ExitError
	if !errors.As(err, &exit) || exit.Code != 1 || out != "Found problem:\n  "+data+" does not exist\n\n" {
		t.Fatalf("no directory: %q, %v", out, err)
	}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = runKmirror(t, "storage", "info", "-c", cfg)
	if !errors.As(err, &exit) || out != "Found log directory:\n  "+data+"\n\nFound problem:\n  "+data+" is not formatted.\n\n" {
		t.Fatalf("not formatted: %q, %v", out, err)
	}
	if _, err := runKmirror(t, "storage", "format", "-t", "MkU3OEVBNTcwNTJENDM2Qg", "-c", cfg); err != nil {
		t.Fatal(err)
	}
	m, _ := config.ReadMetaProperties(data)
	out, err = runKmirror(t, "storage", "info", "-c", cfg)
	want := "Found log directory:\n  " + data + "\n\nFound metadata: {cluster.id=MkU3OEVBNTcwNTJENDM2Qg, directory.id=" + m.DirectoryID + ", node.id=1, version=1}\n\n"
	if err != nil || out != want {
		t.Fatalf("formatted: %q, %v\nwant %q", out, err, want)
	}
}

// TestStorageFormatAddScram: --add-scram (kafka-storage's syntax) writes the SCRAM
// credentials' bootstrap records, never the passwords, also for a one-node config; a
// malformed entry is refused without quoting its password.
func TestStorageFormatAddScram(t *testing.T) {
	tmp := t.TempDir()
	legacy := filepath.Join(tmp, "legacy.properties")
	data := filepath.Join(tmp, "data")
	if err := os.WriteFile(legacy, []byte("listeners=SASL_SSL://localhost:9092\nlog.dirs="+data+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runKmirror(t, "storage", "format", "-t", "MkU3OEVBNTcwNTJENDM2Qg", "-c", legacy, "--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]",
		"--add-scram", "SCRAM-SHA-512=[name=bob,password=bob-secret,iterations=8192]"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(data, metadata.BootstrapFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "secret") {
		t.Fatal("the bootstrap file holds a password")
	}
	recs, err := metadata.ReadBootstrap(data)
	if err != nil || len(recs) != 2 {
		t.Fatalf("bootstrap records %v, %v", recs, err)
	}
	a, b := recs[0].(metadata.UserScramCredentialRecord), recs[1].(metadata.UserScramCredentialRecord)
	if a.Name != "admin" || a.Mechanism != 1 || a.Iterations != 4096 || b.Name != "bob" || b.Mechanism != 2 || b.Iterations != 8192 || len(a.StoredKey) != 32 || len(b.ServerKey) != 64 {
		t.Fatalf("records %+v %+v", a, b)
	}
	_, err = runKmirror(t, "storage", "format", "-t", "MkU3OEVBNTcwNTJENDM2Qg", "-c", legacy, "--add-scram", "SCRAM-SHA-1=[name=x,password=top-secret]")
	if err == nil || strings.Contains(err.Error(), "top-secret") {
		t.Fatalf("a SCRAM-SHA-1 entry: %v", err)
	}
}
