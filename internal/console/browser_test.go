package console_test

import (
	"context"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/console"
)

// chromium returns the path of Debian's chromium; without it the test is skipped,
// except in CI (CI set), whose scripts/install-deps.sh installs it.
func chromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; scripts/install-deps.sh installs it (apt-get install chromium)")
		}
		t.Skip("chromium is not installed (apt-get install chromium, or scripts/install-deps.sh); skipping the headless browser test")
	}
	return p
}

// headless runs chromium headless on url with args and returns its stdout.
func headless(t *testing.T, ctx context.Context, bin, url string, args ...string) string {
	t.Helper()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=3000"}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return string(out)
}

// artifactDir is where the screenshot goes: $KMIRROR_TEST_ARTIFACTS, else the
// repository's git-ignored test-artifacts/.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("KMIRROR_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConsoleInChromium loads the console of a destination whose mirror has six
// partitions — four MIRRORING, one PAUSED and one FAILED (its source topic recreated
// under the same name, spec section 16) — in headless Chromium and checks the rendered
// DOM: each partition's state and lag, the FAILED partition's error text and the lag
// graph; it saves a screenshot of the page.
func TestConsoleInChromium(t *testing.T) {
	bin := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	src := brokertest.Start(t, nil)
	adm := kadm.NewClient(src.Client())
	for topic, n := range map[string]int32{"orders": 4, "held": 1, "gone": 1} {
		if _, err := adm.CreateTopic(ctx, n, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	pc := src.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, ctx, pc, "orders", 4, 20)
	produce(t, ctx, pc, "held", 1, 3)
	produce(t, ctx, pc, "gone", 1, 5)

	dst := brokertest.Start(t, nil)
	cs := startConsole(t, dst)
	dst.MirrorFrom(ctx, "dr", src.Addr(), "orders", "held", "gone")
	waitMirror(t, ctx, cs, "dr", "six partitions MIRRORING at lag 0", func(ps map[string]console.PartitionView) bool {
		if len(ps) != 6 {
			return false
		}
		for _, p := range ps {
			if p.State != "MIRRORING" || p.Lag != 0 || p.DestinationOffset <= 0 {
				return false
			}
		}
		return true
	})

	pause(t, ctx, dst, "dr", "held")
	if _, err := adm.DeleteTopics(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "gone"); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("recreating gone: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	produce(t, ctx, pc, "gone", 1, 12)
	m := waitMirror(t, ctx, cs, "dr", "held PAUSED and gone FAILED", func(ps map[string]console.PartitionView) bool {
		return ps["held-0"].State == "PAUSED" && ps["gone-0"].State == "FAILED" && ps["gone-0"].Error != ""
	})
	for ctx.Err() == nil && len(m.History) == 0 { // the graph has a sample to draw
		time.Sleep(50 * time.Millisecond)
		m = mirrors(t, cs)[0]
	}

	dom := headless(t, ctx, bin, cs.URL()+"/", "--dump-dom")
	rows := regexp.MustCompile(`(?s)<tr class="partition" data-topic="([^"]+)" data-partition="(\d+)" data-state="([A-Z_]+)">(.*?)</tr>`).FindAllStringSubmatch(dom, -1)
	if len(rows) != 6 {
		t.Fatalf("the rendered page has %d partition rows, want 6:\n%s", len(rows), dom)
	}
	want := map[string]console.PartitionView{}
	for _, p := range m.Partitions {
		want[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p
	}
	lagCell := regexp.MustCompile(`<td class="lag">([^<]*)</td>`)
	stateCell := regexp.MustCompile(`<td class="state state-[A-Z_]+">([A-Z_]+)</td>`)
	states := map[string]int{}
	for _, r := range rows {
		key := r[1] + "-" + r[2]
		w, ok := want[key]
		if !ok {
			t.Errorf("row %s is not a partition of the mirror", key)
			continue
		}
		states[r[3]]++
		if r[3] != w.State {
			t.Errorf("%s: data-state %s, want %s", key, r[3], w.State)
		}
		if c := stateCell.FindStringSubmatch(r[4]); c == nil || c[1] != w.State {
			t.Errorf("%s: state cell %v, want %s", key, c, w.State)
		}
		lag := "–"
		if w.Lag >= 0 {
			lag = fmt.Sprint(w.Lag)
		}
		if c := lagCell.FindStringSubmatch(r[4]); c == nil || c[1] != lag {
			t.Errorf("%s: lag cell %v, want %s", key, c, lag)
		}
		if strings.HasPrefix(key, "orders-") && (w.State != "MIRRORING" || w.Lag != 0) {
			t.Errorf("%s: %s lag %d, want MIRRORING at lag 0", key, w.State, w.Lag)
		}
	}
	if states["MIRRORING"] != 4 || states["PAUSED"] != 1 || states["FAILED"] != 1 {
		t.Errorf("states in the DOM: %v, want 4 MIRRORING, 1 PAUSED, 1 FAILED", states)
	}
	failed := regexp.MustCompile(`(?s)<li class="failed-partition" data-topic="gone" data-partition="0">.*?<span class="failed-error">([^<]+)</span>`).FindStringSubmatch(dom)
	if failed == nil || html.UnescapeString(failed[1]) != want["gone-0"].Error {
		t.Errorf("FAILED error text in the DOM: %v, want %q", failed, want["gone-0"].Error)
	}
	graph := regexp.MustCompile(`(?s)<svg class="lag-graph" data-mirror="dr"[^>]*>.*?<polyline class="graph-line" points="[0-9., ]+"`).FindString(dom)
	if graph == "" {
		t.Errorf("no lag graph with a polyline for dr in the DOM")
	}

	shot := filepath.Join(artifactDir(t), "console-chromium.png")
	headless(t, ctx, bin, cs.URL()+"/", "--window-size=1280,2400", "--screenshot="+shot)
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}
