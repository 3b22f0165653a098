package mirrorscli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/security"
)

// runCmd runs `mirrors args...` in-process and returns stdout, stderr and
// the error.
func runCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := NewCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestValidationErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string // first stderr line
	}{
		{"two actions", []string{"--bootstrap-server", "x:1", "--list", "--describe"}, "Error: only one action is allowed, got --list and --describe"},
		{"alias and action", []string{"--bootstrap-server", "x:1", "--add", "--remove", "--mirror", "m", "--topic", "a"}, "Error: only one action is allowed, got --start and --stop"},
		{"no action", []string{"--bootstrap-server", "x:1"}, "Error: exactly one action is required: --create, --alter, --delete, --list, --describe, --start, --stop, --pause, --resume or --recover"},
		{"missing bootstrap", []string{"--list"}, "Error: --bootstrap-server is required"},
		{"missing mirror", []string{"--bootstrap-server", "x:1", "--start", "--topics", "a"}, "Error: --start requires --mirror"},
		{"missing topics", []string{"--bootstrap-server", "x:1", "--pause", "--mirror", "m"}, "Error: --pause requires --topics"},
		{"invalid regex", []string{"--bootstrap-server", "x:1", "--start", "--mirror", "m", "--topics", "a,b[", "--dry-run"}, "Error: invalid regex \"b[\": missing closing ]"},
		{"invalid exclude regex", []string{"--bootstrap-server", "x:1", "--start", "--mirror", "m", "--topics", ".*", "--exclude", "(x"}, "Error: invalid regex \"(x\": missing closing )"},
		{"exclude with stop", []string{"--bootstrap-server", "x:1", "--stop", "--mirror", "m", "--topics", "a", "--exclude", "b"}, "Error: --exclude is only valid with --start"},
		{"create without config", []string{"--bootstrap-server", "x:1", "--create", "--mirror", "m"}, "Error: --create requires --mirror-config"},
		{"missing config file", []string{"--bootstrap-server", "x:1", "--create", "--mirror", "m", "--mirror-config", filepath.Join(dir, "nope.properties")},
			"Error: --mirror-config: open " + filepath.Join(dir, "nope.properties") + ": no such file or directory"},
		{"missing command config", []string{"--bootstrap-server", "x:1", "--list", "--command-config", filepath.Join(dir, "client.properties")},
			"Error: --command-config: open " + filepath.Join(dir, "client.properties") + ": no such file or directory"},
		{"alter and create", []string{"--bootstrap-server", "x:1", "--create", "--alter", "--mirror", "m", "--mirror-config", "f"}, "Error: only one action is allowed, got --create and --alter"},
		{"alter without mirror", []string{"--bootstrap-server", "x:1", "--alter", "--delete-config", "a"}, "Error: --alter requires --mirror"},
		{"alter without changes", []string{"--bootstrap-server", "x:1", "--alter", "--mirror", "m"}, "Error: --alter requires --mirror-config or --delete-config"},
		{"delete-config without alter", []string{"--bootstrap-server", "x:1", "--delete", "--mirror", "m", "--delete-config", "a"}, "Error: --delete-config is only valid with --alter"},
		{"mirror-config with start", []string{"--bootstrap-server", "x:1", "--start", "--mirror", "m", "--topics", "a", "--mirror-config", "f"}, "Error: --mirror-config is only valid with --create or --alter"},
		{"configs without describe", []string{"--bootstrap-server", "x:1", "--list", "--configs"}, "Error: --configs is only valid with --describe"},
		{"configs without mirror", []string{"--bootstrap-server", "x:1", "--describe", "--configs"}, "Error: --configs requires --mirror"},
		{"failed without describe", []string{"--bootstrap-server", "x:1", "--list", "--failed"}, "Error: --failed is only valid with --describe"},
		{"unknown flag", []string{"--bootstrap-server", "x:1", "--list", "--frobnicate"}, "Error: unknown flag: --frobnicate"},
		{"positional argument", []string{"--bootstrap-server", "x:1", "--list", "extra"}, "Error: unexpected argument \"extra\" (give topics as one CSV to --topics, and quote regexes such as '.*' so that the shell does not expand them)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, err := runCmd(t, c.args...)
			var ee *ExitError
			if !errors.As(err, &ee) || ee.Code != 1 {
				t.Fatalf("err = %#v, want *ExitError with code 1", err)
			}
			first, _, _ := strings.Cut(errOut, "\n")
			if first != c.want {
				t.Errorf("stderr first line = %q, want %q", first, c.want)
			}
			if strings.Count(errOut, "Error:") != 1 {
				t.Errorf("stderr has %d Error: lines:\n%s", strings.Count(errOut, "Error:"), errOut)
			}
			if out != "" {
				t.Errorf("stdout = %q", out)
			}
		})
	}
}

// TestUsagePrintedForFlagErrors checks a wrong combination of flags prints
// the usage after the one-line reason (spec section 12), and a wrong value or a
// runtime error does not.
func TestUsagePrintedForFlagErrors(t *testing.T) {
	_, errOut, _ := runCmd(t, "--bootstrap-server", "x:1", "--list", "--describe")
	if !strings.Contains(errOut, "Usage:") || !strings.Contains(errOut, "--bootstrap-server") {
		t.Errorf("no usage in:\n%s", errOut)
	}
	_, errOut, _ = runCmd(t, "--bootstrap-server", "x:1", "--pause", "--mirror", "m")
	if !strings.HasPrefix(errOut, "Error: --pause requires --topics\n") || !strings.Contains(errOut, "Usage:") {
		t.Errorf("missing --topics: want the reason and the usage, got:\n%s", errOut)
	}
	for _, args := range [][]string{
		{"--bootstrap-server", "x:1", "--start", "--mirror", "m", "--topics", "a,b["},
		{"--bootstrap-server", "x:1", "--start", "--mirror", "m", "--topics", ".*", "--exclude", "(x"},
		{"--bootstrap-server", "x:1", "--pause", "--mirror", "m", "--topics", "*"},
	} {
		_, errOut, err := runCmd(t, args...)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != 1 || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "Error: invalid regex ") {
			t.Errorf("%v: want one line `Error: invalid regex ...` and exit 1, got %v:\n%s", args, err, errOut)
		}
	}
	dir := t.TempDir()
	_, errOut, _ = runCmd(t, "--bootstrap-server", "x:1", "--create", "--mirror", "m", "--mirror-config", filepath.Join(dir, "x"))
	if strings.Contains(errOut, "Usage:") {
		t.Errorf("usage printed for a runtime error:\n%s", errOut)
	}
}

func TestDryRunSendsNothing(t *testing.T) {
	// Port 1 on loopback: nothing listens; a dry run must not try.
	out, errOut, err := runCmd(t, "--bootstrap-server", "127.0.0.1:1", "--add", "--mirror", "my-mirror", "--topic", "orders,.*", "--exclude", "__.*", "--dry-run")
	if err != nil {
		t.Fatalf("err %v, stderr %s", err, errOut)
	}
	want := "Dry run: nothing is sent to 127.0.0.1:1.\nWould send StartMirrorTopics: mirror my-mirror, topics [orders], include patterns [.*], exclude patterns [__.*].\n"
	if out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
}

func TestUnreachableBootstrap(t *testing.T) {
	_, errOut, err := runCmd(t, "--bootstrap-server", "127.0.0.1:1", "--list")
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "Error: cannot reach 127.0.0.1:1: ") {
		t.Errorf("stderr = %q", errOut)
	}
}

func TestReadProperties(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.properties")
	text := "# comment\n! other comment\n\nbootstrap.servers = src:9092\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n    username=\"u\" password=\"p\\\\\\\"q\";\nmirror.topics.exclude: __.*\nkey\\=with\\:seps value \\u0041\nempty\nbootstrap.servers=src2:9092\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	props, err := ReadProperties(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Property{
		{"bootstrap.servers", "src2:9092"},
		{"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p\"q";`},
		{"mirror.topics.exclude", "__.*"},
		{"key=with:seps", "value A"},
		{"empty", ""},
	}
	if len(props) != len(want) {
		t.Fatalf("got %q", props)
	}
	for i := range want {
		if props[i] != want[i] {
			t.Errorf("prop %d = %q, want %q", i, props[i], want[i])
		}
	}
	j, err := security.ParseJAAS(props[1].Value)
	if err != nil {
		t.Fatal(err)
	}
	if u, p := j.Credentials(); u != "u" || p != `p"q` {
		t.Errorf("jaas user %q pass %q", u, p)
	}
}
