package broker_test

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/brokertest"
)

func kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("kcat", args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kcat %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestKcat: librdkafka lists metadata, produces and consumes (-e and -o -5) the same
// records against kmirror.
func TestKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed; run `make deps`")
	}
	b := brokertest.Start(t, map[string]string{"num.partitions": "1"})
	addr := b.Addr()
	var in strings.Builder
	for i := 0; i < 20; i++ {
		in.WriteString("k" + string(rune('a'+i)) + ":v" + string(rune('a'+i)) + "\n")
	}
	kcat(t, in.String(), "-b", addr, "-P", "-t", "kc", "-K:")
	meta := kcat(t, "", "-b", addr, "-L", "-t", "kc")
	if !strings.Contains(meta, `topic "kc" with 1 partitions`) || !strings.Contains(meta, "broker 1") {
		t.Fatalf("metadata listing:\n%s", meta)
	}
	all := kcat(t, "", "-b", addr, "-C", "-t", "kc", "-e", "-q", "-f", "%o %k %s\n")
	lines := strings.Split(strings.TrimSpace(all), "\n")
	if len(lines) != 20 || lines[0] != "0 ka va" || lines[19] != "19 kt vt" {
		t.Fatalf("consumed:\n%s", all)
	}
	tail := kcat(t, "", "-b", addr, "-C", "-t", "kc", "-o", "-5", "-e", "-q", "-f", "%o %k\n")
	if strings.TrimSpace(tail) != "15 kp\n16 kq\n17 kr\n18 ks\n19 kt" {
		t.Fatalf("-o -5 gave:\n%s", tail)
	}
}

// TestKcatBalancedConsumerResumes: a librdkafka balanced consumer group (kcat -G)
// consumes and commits; a second run of the same group resumes from the commits.
func TestKcatBalancedConsumerResumes(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed; run `make deps`")
	}
	b := brokertest.Start(t, map[string]string{"num.partitions": "3"})
	addr := b.Addr()
	lines := func(from, to int) string {
		var s strings.Builder
		for i := from; i <= to; i++ {
			s.WriteString(strconv.Itoa(i) + ":v\n")
		}
		return s.String()
	}
	count := func(out string) int { return len(strings.Fields(out)) }
	kcat(t, lines(1, 300), "-b", addr, "-P", "-t", "kg", "-K:")
	first := kcat(t, "", "-b", addr, "-G", "kg-group", "kg", "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%k\n")
	if n := count(first); n != 300 {
		t.Fatalf("first group run read %d records, want 300", n)
	}
	kcat(t, lines(301, 350), "-b", addr, "-P", "-t", "kg", "-K:")
	second := kcat(t, "", "-b", addr, "-G", "kg-group", "kg", "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%k\n")
	if n := count(second); n != 50 {
		t.Fatalf("second group run read %d records, want the 50 new ones:\n%s", n, second)
	}
	for _, k := range strings.Fields(second) {
		if v, _ := strconv.Atoi(k); v <= 300 {
			t.Fatalf("second run re-read committed record %s", k)
		}
	}
}
