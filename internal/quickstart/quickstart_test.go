package quickstart

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for Run's writer goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunShowsMirroringAndStops runs the interactive quickstart on free ports until
// the live table shows every partition of orders MIRRORING with data mirrored, then
// cancels it (Ctrl-C) and checks that both clusters stopped and a second run on the
// same data comes back.
func TestRunShowsMirroringAndStops(t *testing.T) {
	data := t.TempDir()
	// The same ports for both runs: the mirror keeps the source's address.
	srcPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	dstPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		var out syncBuffer
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			errc <- Run(ctx, Options{Data: data, SourcePort: srcPort, DestinationPort: dstPort, Out: &out, Refresh: 200 * time.Millisecond})
		}()
		deadline := time.Now().Add(60 * time.Second)
		for !tableMirroring(out.String()) {
			select {
			case err := <-errc:
				cancel()
				t.Fatalf("run %d: Run returned early: %v\n%s", run, err, out.String())
			default:
			}
			if time.Now().After(deadline) {
				cancel()
				<-errc
				t.Fatalf("run %d: no MIRRORING table with data within 60 s:\n%s", run, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		s := out.String()
		for _, want := range []string{"--stop --topics orders --mirror my-mirror", "Stopping both clusters"} {
			if !strings.Contains(s, want) {
				t.Errorf("run %d: output lacks %q", run, want)
			}
		}
	}
}

// tableMirroring reports whether the last table printed shows the 6 partitions of
// orders MIRRORING, at least one with a destination offset above 0.
func tableMirroring(s string) bool {
	i := strings.LastIndex(s, "TOPIC")
	if i < 0 {
		return false
	}
	n, data := 0, false
	for _, line := range strings.Split(s[i:], "\n") {
		f := strings.Fields(line)
		if len(f) == 6 && f[0] == Topic && f[5] == "MIRRORING" {
			n++
			if f[3] != "0" && f[3] != "-" {
				data = true
			}
		}
	}
	return n == Partitions && data
}
