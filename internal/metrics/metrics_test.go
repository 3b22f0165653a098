package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/metrics"
)

// scrape GETs /metrics and returns each sample line as series → value, the series
// written as Prometheus prints it (name{label="value",...}, labels sorted by name).
func scrape(t *testing.T, addr string) map[string]string {
	t.Helper()
	resp, err := http.Get("http://" + addr + metrics.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		out[line[:i]] = line[i+1:]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMirrorMetrics mirrors a 2-partition topic from one broker to another whose
// metrics endpoint is on, and checks the lag, offsets, state and sync-task series once
// the mirror has caught up.
func TestMirrorMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src := brokertest.Start(t, nil)
	if _, err := kadm.NewClient(src.Client()).CreateTopic(ctx, 2, 1, nil, "mt"); err != nil {
		t.Fatal(err)
	}
	pc := src.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 5; i++ {
		if err := pc.ProduceSync(ctx, &kgo.Record{Topic: "mt", Partition: 0, Value: []byte(fmt.Sprint("v", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	dst := brokertest.Start(t, nil)
	mux := http.NewServeMux()
	mux.Handle(metrics.Path, metrics.Handler(metrics.NewRegistry(dst.Broker)))
	ms := httptest.NewServer(mux)
	t.Cleanup(ms.Close)
	addr := strings.TrimPrefix(ms.URL, "http://")

	before := scrape(t, addr)
	if before["kmirror_cluster_mirrors"] != "0" || before["kmirror_partitions"] == "" {
		t.Fatalf("before the mirror: cluster_mirrors=%q partitions=%q", before["kmirror_cluster_mirrors"], before["kmirror_partitions"])
	}

	dst.MirrorFrom(ctx, "m1", src.Addr(), "mt")

	p0 := `{mirror="m1",partition="0",topic="mt"}`
	p1 := `{mirror="m1",partition="1",topic="mt"}`
	var got map[string]string
	for {
		got = scrape(t, addr)
		if got["kmirror_mirror_partition_lag_records"+p0] == "0" && got["kmirror_mirror_partition_log_end_offset"+p0] == "5" &&
			got["kmirror_mirror_partition_lag_records"+p1] == "0" &&
			got[`kmirror_mirror_partitions{mirror="m1",state="MIRRORING"}`] == "2" &&
			got[`kmirror_mirror_sync_last_success_timestamp_seconds{mirror="m1",task="group-offsets"}`] != "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("mirror did not reach lag 0 in MIRRORING; last scrape:\n%s", dump(got, "kmirror_"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := map[string]string{
		"kmirror_cluster_mirrors":                                                                "1",
		"kmirror_mirror_partition_source_high_watermark" + p0:                                    "5",
		"kmirror_mirror_partition_log_end_offset" + p1:                                           "0",
		`kmirror_mirror_partition_state{mirror="m1",partition="0",state="MIRRORING",topic="mt"}`: "1",
		`kmirror_mirror_partitions{mirror="m1",state="FAILED"}`:                                  "0",
		`kmirror_mirror_sync_errors_total{mirror="m1",task="topic-configs"}`:                     "0",
		"kmirror_mirror_partition_skipped_offsets" + p0:                                          "0",
		"kmirror_mirror_partition_records_total" + p0:                                            "5",
		"kmirror_mirror_partition_records_total" + p1:                                            "0",
		"kmirror_mirror_partition_seconds_behind" + p0:                                           "0",
		`kmirror_mirror_fetch_errors_total{mirror="m1"}`:                                         "0",
		"kmirror_mirror_throttle_seconds_total":                                                  "0",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if v := got["kmirror_mirror_partition_fetched_bytes_total"+p0]; v == "" || v == "0" {
		t.Errorf("fetched bytes of partition 0 = %q, want > 0", v)
	}
	if v := got[`kmirror_mirror_fetch_requests_total{mirror="m1"}`]; v == "" || v == "0" {
		t.Errorf("fetch requests of m1 = %q, want > 0", v)
	}
	if v := got["kmirror_mirror_partition_appends_total"+p0]; v == "" || v == "0" {
		t.Errorf("appends of partition 0 = %q, want > 0", v)
	}
	if t.Failed() {
		t.Log(dump(got, "kmirror_"))
	}
}

func dump(m map[string]string, prefix string) string {
	var b strings.Builder
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			fmt.Fprintf(&b, "%s %s\n", k, v)
		}
	}
	return b.String()
}
