package mirrorscli

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// TestStartUnmatchedPatternIsKept starts a pattern that matches no source topic: the
// message says the pattern is kept, and a source topic created afterwards that matches it
// is indeed mirrored (topic discovery, spec section 8).
func TestStartUnmatchedPatternIsKept(t *testing.T) {
	src := brokertest.Start(t, nil)
	dst := brokertest.Start(t, nil)
	run := func(args ...string) (string, string, error) {
		return runCmd(t, append([]string{"--bootstrap-server", dst.Addr()}, args...)...)
	}
	if _, errOut, err := run("--create", "--mirror", "second", "--mirror-config", writeFile(t, "bootstrap.servers="+src.Addr()+"\n")); err != nil {
		t.Fatalf("--create: %v %s", err, errOut)
	}
	out, errOut, err := run("--start", "--mirror", "second", "--topics", "app.*")
	want := "No topic started in mirror second (patterns leave out its paused and stopped topics, and topics the source mirrors from this cluster; name a stopped topic to mirror it again); the pattern app.* is kept: new source topics that match it will be mirrored by second.\n"
	if err != nil || out != want {
		t.Fatalf("--start app.*: %v, stdout %q, stderr %q; want %q", err, out, errOut, want)
	}
	if _, err := kadm.NewClient(src.Client()).CreateTopic(context.Background(), 1, 1, nil, "app.race"); err != nil {
		t.Fatal(err)
	}
	produce(t, src, "app.race", 1, 3)
	waitRecords(t, dst, "app.race", 3)
}
