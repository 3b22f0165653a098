package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeConsoleBindError: a metrics.listener that cannot bind stops `kmirror serve`
// at start-up with an error naming the key.
func TestServeConsoleBindError(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(exe, "serve", "--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", filepath.Join(dir, "data"),
		"--override", "metrics.listener="+taken.Addr().String())
	cmd.Env = append(os.Environ(), runAsKmirror+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("serve with a taken metrics.listener exited 0:\n%s", out)
	}
	if !strings.Contains(string(out), "Error: metrics.listener "+taken.Addr().String()+": ") {
		t.Fatalf("the error does not name metrics.listener:\n%s", out)
	}
}
