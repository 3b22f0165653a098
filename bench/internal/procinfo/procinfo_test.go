package procinfo

import (
	"os"
	"strings"
	"testing"
)

// TestReadsThisMachine: the CPU model, memory size and this process's peak RSS are read
// from /proc (the benchmarks print them in their reports).
func TestReadsThisMachine(t *testing.T) {
	if CPUModel() == "" {
		t.Fatal("no model name in /proc/cpuinfo")
	}
	if m := MemTotal(); !strings.HasSuffix(m, " GiB") || strings.HasPrefix(m, "0.0") {
		t.Fatalf("MemTotal %q", m)
	}
	if rss := PeakRSSMB(os.Getpid()); rss <= 0 {
		t.Fatalf("peak RSS of this process %v MiB", rss)
	}
	if rss := PeakRSSMB(-1); rss != -1 {
		t.Fatalf("peak RSS of no process %v, want -1", rss)
	}
}
