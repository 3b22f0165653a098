package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/console"
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

// TestServeDefaultConsoleTaken: the embedded default's console address in use (another
// broker started from flags on this machine) is a warning naming metrics.listener, and the
// broker serves without its console.
func TestServeDefaultConsoleTaken(t *testing.T) {
	if taken, err := net.Listen("tcp", console.DefaultListener); err == nil {
		defer taken.Close()
	} // else another process holds it already: taken all the same
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(exe, "serve", "--listeners", "PLAINTEXT://"+addr, "--log-dirs", filepath.Join(t.TempDir(), "data"))
	cmd.Env = append(os.Environ(), runAsKmirror+"=1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { cmd.Process.Kill(); <-done }()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; ; i++ {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("serve exited (%v) with its default console address taken:\n%s", err, out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := cl.Ping(ctx)
		cancel()
		if err == nil {
			break
		}
		if i > 100 {
			t.Fatalf("the broker did not answer: %v\n%s", err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "status console not started") || !strings.Contains(out.String(), "metrics.listener") {
		t.Fatalf("no warning naming metrics.listener:\n%s", out.String())
	}
}
