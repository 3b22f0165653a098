package consumecli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/brokertest"
	consumecli "github.com/kmirror/kmirror/internal/cli/consume"
	producecli "github.com/kmirror/kmirror/internal/cli/produce"
)

func consume(t *testing.T, addr string, args ...string) string {
	t.Helper()
	cmd := consumecli.NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(append(args, "--bootstrap-server", addr))
	if err := cmd.Execute(); err != nil {
		t.Fatalf("consume %v: %v", args, err)
	}
	return out.String()
}

// TestProduceConsume produces lines with keys through `kmirror produce` to a real broker
// and reads them back with `kmirror consume`: from the start, from an offset, as JSON,
// and in a group whose committed offsets are exactly the records printed.
func TestProduceConsume(t *testing.T) {
	b := brokertest.Start(t, nil)
	adm := kadm.NewClient(b.Client())
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "pc"); err != nil {
		t.Fatal(err)
	}
	p := producecli.NewCommand()
	p.SetIn(strings.NewReader("k1:alpha\nk2:beta\ngamma\nk4:delta:x\n"))
	p.SetArgs([]string{"pc", "--key-separator", ":", "--bootstrap-server", b.Addr()})
	if err := p.Execute(); err != nil {
		t.Fatal(err)
	}

	if got := consume(t, b.Addr(), "pc", "-n", "4"); got != "alpha\nbeta\ngamma\ndelta:x\n" {
		t.Errorf("values: %q", got)
	}
	if got := consume(t, b.Addr(), "pc", "-n", "2", "--offset", "2", "--format", `%p/%o %k=%v\n`); got != "0/2 =gamma\n0/3 k4=delta:x\n" {
		t.Errorf("--offset 2 with a format: %q", got)
	}
	if got := consume(t, b.Addr(), "pc", "-n", "1", "--format", "json"); !strings.HasPrefix(got, `{"topic":"pc","partition":0,"offset":0,"timestamp":`) || !strings.HasSuffix(got, `"key":"k1","value":"alpha"}`+"\n") {
		t.Errorf("json: %q", got)
	}
	if got := consume(t, b.Addr(), "pc", "-n", "3", "--group", "g"); got != "alpha\nbeta\ngamma\n" {
		t.Errorf("group, first run: %q", got)
	}
	offs, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("pc", 0); o.At != 3 {
		t.Errorf("group g committed %d, want 3 (the records printed)", o.At)
	}
	if got := consume(t, b.Addr(), "pc", "-n", "1", "--group", "g"); got != "delta:x\n" {
		t.Errorf("group, second run resumes at the commit: %q", got)
	}
}

// TestBadFlags: a bad --offset or --format is a one-line error before any connection.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"t", "--offset", "middle"}, {"t", "--offset", "-3"}, {"t", "--format", "%q"}, {"t", "--format", `\x`}} {
		cmd := consumecli.NewCommand()
		cmd.SetArgs(append(args, "--bootstrap-server", "127.0.0.1:1"))
		if err := cmd.Execute(); err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "--") {
			t.Errorf("%v: %v", args, err)
		}
	}
}
