package broker_test

import (
	"os/exec"
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
