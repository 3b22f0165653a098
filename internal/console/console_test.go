package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/console"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// startConsole serves b's console on a free loopback port until the test ends.
func startConsole(t *testing.T, b *brokertest.Broker) *console.Server {
	t.Helper()
	cs, err := console.Start("127.0.0.1:0", b.Broker, slog.New(slog.NewTextHandler(io.Discard, nil)), console.Options{SampleInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(context.Background()) })
	return cs
}

// get GETs url and returns the status code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// mirrors GETs /api/mirrors.
func mirrors(t *testing.T, cs *console.Server) []console.MirrorView {
	t.Helper()
	code, body := get(t, cs.URL()+"/api/mirrors")
	if code != http.StatusOK {
		t.Fatalf("/api/mirrors: %d %s", code, body)
	}
	var out []console.MirrorView
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("/api/mirrors is not JSON: %v\n%s", err, body)
	}
	return out
}

// waitMirror polls /api/mirrors until ok holds for mirror name's partitions (the test's
// deadline bounds it) and returns that view.
func waitMirror(t *testing.T, ctx context.Context, cs *console.Server, name, what string, ok func(map[string]console.PartitionView) bool) console.MirrorView {
	t.Helper()
	for {
		for _, m := range mirrors(t, cs) {
			if m.Name != name {
				continue
			}
			ps := map[string]console.PartitionView{}
			for _, p := range m.Partitions {
				ps[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p
			}
			if ok(ps) {
				return m
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %+v", what, mirrors(t, cs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func produce(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partitions, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConsoleEndpoints mirrors a topic to a broker whose console is on and checks the
// page, /api/mirrors, /api/cluster, /api/topics, /api/groups, /healthz, /readyz and
// /metrics over real HTTP.
func TestConsoleEndpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src := brokertest.Start(t, nil)
	if _, err := kadm.NewClient(src.Client()).CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produce(t, ctx, src.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())), "orders", 2, 6)
	dst := brokertest.Start(t, nil)
	cs := startConsole(t, dst)
	dst.MirrorFrom(ctx, "m1", src.Addr(), "orders")
	m := waitMirror(t, ctx, cs, "m1", "both partitions MIRRORING at lag 0", func(ps map[string]console.PartitionView) bool {
		return len(ps) == 2 && ps["orders-0"].State == "MIRRORING" && ps["orders-0"].Lag == 0 && ps["orders-0"].DestinationOffset == 3 &&
			ps["orders-1"].State == "MIRRORING" && ps["orders-1"].Lag == 0
	})
	if m.SourceBootstrap != src.Addr() || m.FailoverLossRecords != 0 || m.States["MIRRORING"] != 2 || len(m.SyncTasks) == 0 {
		t.Errorf("mirror view: %+v", m)
	}

	// a group on the destination, with lag: committed 1 of 3 on orders-0
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := kadm.NewClient(dst.Client()).CommitOffsets(ctx, "app", offs); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, cs.URL()+"/api/groups")
	var groups []console.GroupView
	if err := json.Unmarshal([]byte(body), &groups); code != http.StatusOK || err != nil {
		t.Fatalf("/api/groups: %d %v %s", code, err, body)
	}
	if len(groups) != 1 || groups[0].Group != "app" || groups[0].Lag != 2 || groups[0].Topics != "orders" {
		t.Errorf("/api/groups: %+v", groups)
	}

	code, page := get(t, cs.URL()+"/")
	if code != http.StatusOK || !strings.Contains(page, "<html") {
		t.Fatalf("GET /: %d\n%s", code, page)
	}
	for _, want := range []string{"Mirror m1", `data-topic="orders" data-partition="1" data-state="MIRRORING"`, "<svg class=\"lag-graph\"", "Consumer groups", "<td>app</td>", "Under-replicated partitions"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	var cluster console.ClusterView
	if _, body := get(t, cs.URL()+"/api/cluster"); json.Unmarshal([]byte(body), &cluster) != nil || cluster.Controller != 1 || len(cluster.Brokers) != 1 || cluster.ClusterID == "" {
		t.Errorf("/api/cluster: %s", body)
	}
	var topics []console.TopicView
	if _, body := get(t, cs.URL()+"/api/topics"); json.Unmarshal([]byte(body), &topics) != nil || !strings.Contains(body, `"mirror": "m1"`) {
		t.Errorf("/api/topics: %s", body)
	}
	if code, body := get(t, cs.URL()+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get(t, cs.URL()+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d %s", code, body)
	}
	if _, body := get(t, cs.URL()+"/metrics"); !strings.Contains(body, `kmirror_mirror_partition_lag_records{mirror="m1",partition="0",topic="orders"} 0`) {
		t.Errorf("/metrics lacks the lag series of m1")
	}
	for _, asset := range []string{"/static/console.css", "/static/console.js"} {
		if code, body := get(t, cs.URL()+asset); code != http.StatusOK || body == "" {
			t.Errorf("GET %s: %d", asset, code)
		}
	}
	if code, _ := get(t, cs.URL()+"/nope"); code != http.StatusNotFound {
		t.Errorf("/nope: %d, want 404", code)
	}
}

// TestStartBindError: a listener that cannot bind is Start's error.
func TestStartBindError(t *testing.T) {
	b := brokertest.Start(t, nil)
	cs := startConsole(t, b)
	if _, err := console.Start(cs.Addr(), b.Broker, slog.New(slog.NewTextHandler(io.Discard, nil)), console.Options{}); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("second console on %s: %v", cs.Addr(), err)
	}
}

// pause pauses topics of mirror on b over the wire.
func pause(t *testing.T, ctx context.Context, b *brokertest.Broker, mirror string, topics ...string) {
	t.Helper()
	req := mirrorproto.NewPauseMirrorTopicsRequest()
	req.MirrorName = mirror
	for _, tp := range topics {
		req.Topics = append(req.Topics, mirrorproto.TopicName{TopicName: tp})
	}
	resp, err := b.Client(kgo.MaxVersions(mirrorproto.ClientVersions())).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*mirrorproto.PauseMirrorTopicsResponse)
	if err := mirrorproto.ErrorFor(r.ErrorCode, r.ErrorMessage); err != nil {
		t.Fatal(err)
	}
	for _, tr := range r.Topics {
		if err := mirrorproto.ErrorFor(tr.ErrorCode, tr.ErrorMessage); err != nil {
			t.Fatalf("pause %s: %v", tr.Name, err)
		}
	}
}
