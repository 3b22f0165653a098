// Package metrics collects the broker's Prometheus metrics (cluster mirroring spec
// section 13); internal/console serves them over HTTP at /metrics on the address of the
// broker config metrics.listener.
//
// Every metric is read from existing broker and mirror state when scraped: the collectors
// keep no bookkeeping of their own and add nothing to the produce, fetch or mirror paths.
// Names follow Kafka's metric names where one exists, with the prefix kmirror_; labels
// are mirror, topic, partition, state and task. docs/operations.md lists every metric and
// the spec metrics that have no data source yet.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirror"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// ConfigKey is the broker config naming the metrics listener (host:port, empty for off).
const ConfigKey = "metrics.listener"

// Path is the HTTP path of the metrics endpoint.
const Path = "/metrics"

// Broker is what the collectors read: the metadata image (topics, partitions, mirrors)
// and the mirroring service. *broker.Broker implements it.
type Broker interface {
	Metadata() *metadata.Controller
	MirrorService() broker.Mirrors
}

// MirrorStats is the part of the mirroring service read on scrape; internal/mirror's
// *Manager implements it. A service that does not is reported without mirror metrics.
type MirrorStats interface {
	Stats() []mirror.PartitionStat
	FetchStats() []mirror.FetchStat
	ThrottleSeconds() float64
	DescribeClusterMirrors(context.Context, *mirrorproto.DescribeClusterMirrorsRequest) *mirrorproto.DescribeClusterMirrorsResponse
}

var (
	partLabels = []string{"mirror", "topic", "partition"}

	descTopics     = prometheus.NewDesc("kmirror_topics", "Topics in the metadata image (internal and mirror topics included).", nil, nil)
	descPartitions = prometheus.NewDesc("kmirror_partitions", "Partitions in the metadata image (internal and mirror topics included).", nil, nil)
	descMirrors    = prometheus.NewDesc("kmirror_cluster_mirrors", "Cluster mirrors in the metadata image.", nil, nil)

	descLag = prometheus.NewDesc("kmirror_mirror_partition_lag_records",
		"Records the mirror partition is behind: source high watermark of the latest fetch minus the destination log end offset, at least 0 (absent before the first fetch response).", partLabels, nil)
	descSourceHW = prometheus.NewDesc("kmirror_mirror_partition_source_high_watermark",
		"Source high watermark from the latest fetch response (absent when unknown).", partLabels, nil)
	descLEO = prometheus.NewDesc("kmirror_mirror_partition_log_end_offset",
		"Log end offset of the destination (mirror) partition (absent when unknown).", partLabels, nil)
	descBytesFetched = prometheus.NewDesc("kmirror_mirror_partition_fetched_bytes_total",
		"Record-batch bytes received from the source since the broker started.", partLabels, nil)
	descBytesAppended = prometheus.NewDesc("kmirror_mirror_partition_appended_bytes_total",
		"Record-batch bytes appended to the mirror partition since the broker started.", partLabels, nil)
	descRecords = prometheus.NewDesc("kmirror_mirror_partition_records_total",
		"Records (from the batch headers, control records included) appended to the mirror partition since the broker started.", partLabels, nil)
	descSecondsBehind = prometheus.NewDesc("kmirror_mirror_partition_seconds_behind",
		"0 when the lag is 0, else the age of the newest mirrored batch's max timestamp (absent when unknown: nothing appended since the broker started).", partLabels, nil)
	descFetchRequests = prometheus.NewDesc("kmirror_mirror_fetch_requests_total",
		"Fetch requests the mirror's fetchers sent to the source since the broker started.", []string{"mirror"}, nil)
	descFetchErrors = prometheus.NewDesc("kmirror_mirror_fetch_errors_total",
		"Failed mirror Fetch requests (connection errors, top-level error codes) plus partitions answered with an error code, since the broker started.", []string{"mirror"}, nil)
	descThrottle = prometheus.NewDesc("kmirror_mirror_throttle_seconds_total",
		"Seconds the mirror fetchers slept to stay under mirror.replication.throttled.rate (partitions listed in mirror.replication.throttled.replicas), since the broker started.", nil, nil)
	descAppends = prometheus.NewDesc("kmirror_mirror_partition_appends_total",
		"Appends of mirrored record batches to the mirror partition since the broker started (one append may hold many batches).", partLabels, nil)
	descSkipped = prometheus.NewDesc("kmirror_mirror_partition_skipped_offsets",
		"Offsets skipped because the source log start passed the mirror position (spec section 16), as reported by DescribeClusterMirrors.", partLabels, nil)
	descTruncated = prometheus.NewDesc("kmirror_mirror_partition_truncated_records",
		"Records dropped by the last failback truncation (spec section 15), as reported by DescribeClusterMirrors.", partLabels, nil)
	descRetry = prometheus.NewDesc("kmirror_mirror_partition_retry_attempt",
		"Retry attempt of a FAILED mirror partition (0 when not retrying).", partLabels, nil)
	descPartState = prometheus.NewDesc("kmirror_mirror_partition_state",
		"1 for the current state of the mirror partition (one series per partition).", append(partLabels[:3:3], "state"), nil)
	descStateCount = prometheus.NewDesc("kmirror_mirror_partitions",
		"Mirror partitions of this broker per mirror and state (every state, 0 included).", []string{"mirror", "state"}, nil)
	descSyncErrors = prometheus.NewDesc("kmirror_mirror_sync_errors_total",
		"Failed runs of a periodic metadata sync task of the mirror since the broker started.", []string{"mirror", "task"}, nil)
	descSyncLastSuccess = prometheus.NewDesc("kmirror_mirror_sync_last_success_timestamp_seconds",
		"Unix time of the last successful run of a periodic metadata sync task (absent before the first).", []string{"mirror", "task"}, nil)
	descSyncLastError = prometheus.NewDesc("kmirror_mirror_sync_last_error_timestamp_seconds",
		"Unix time of the last failed run of a periodic metadata sync task (absent before the first).", []string{"mirror", "task"}, nil)
)

// allStates are the partition states reported by kmirror_mirror_partitions.
var allStates = func() []mirrorproto.State {
	out := []mirrorproto.State{mirrorproto.StateUnknown}
	for s := mirrorproto.State(0); ; s++ {
		if _, ok := mirrorproto.ParseState(s.String()); !ok {
			return out
		}
		out = append(out, s)
	}
}()

// Collector is the prometheus.Collector of the broker and mirror metrics.
type Collector struct {
	b Broker
}

// NewCollector returns a collector reading b on every scrape.
func NewCollector(b Broker) *Collector { return &Collector{b: b} }

// Describe sends the descriptors of every metric (prometheus.Collector).
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTopics, descPartitions, descMirrors, descLag, descSourceHW, descLEO,
		descBytesFetched, descBytesAppended, descAppends, descRecords, descSecondsBehind, descFetchRequests, descFetchErrors, descThrottle, descSkipped, descTruncated, descRetry, descPartState,
		descStateCount, descSyncErrors, descSyncLastSuccess, descSyncLastError} {
		ch <- d
	}
}

// Collect reads the metadata image and the mirroring service (prometheus.Collector).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	im := c.b.Metadata().Image()
	parts := 0
	for _, t := range im.Topics {
		parts += int(t.Partitions)
	}
	ch <- prometheus.MustNewConstMetric(descTopics, prometheus.GaugeValue, float64(len(im.Topics)))
	ch <- prometheus.MustNewConstMetric(descPartitions, prometheus.GaugeValue, float64(parts))
	ch <- prometheus.MustNewConstMetric(descMirrors, prometheus.GaugeValue, float64(len(im.Mirrors)))

	ms, ok := c.b.MirrorService().(MirrorStats)
	if !ok || ms == nil {
		return
	}
	stats := ms.Stats()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	desc := ms.DescribeClusterMirrors(ctx, &mirrorproto.DescribeClusterMirrorsRequest{})
	type key struct {
		mirror, topic string
		partition     int32
	}
	described := map[key]mirrorproto.DescribeClusterMirrorsResponsePartition{}
	counts := map[string]map[mirrorproto.State]int{}
	for _, m := range desc.Mirrors {
		if m.ErrorCode != 0 {
			continue
		}
		counts[m.MirrorName] = map[mirrorproto.State]int{}
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				described[key{m.MirrorName, t.TopicName, p.PartitionIndex}] = p
			}
		}
		for _, st := range m.SyncTasks {
			ch <- prometheus.MustNewConstMetric(descSyncErrors, prometheus.CounterValue, float64(st.ErrorCount), m.MirrorName, st.Task)
			if st.LastSuccessMs >= 0 {
				ch <- prometheus.MustNewConstMetric(descSyncLastSuccess, prometheus.GaugeValue, float64(st.LastSuccessMs)/1000, m.MirrorName, st.Task)
			}
			if st.LastErrorMs >= 0 {
				ch <- prometheus.MustNewConstMetric(descSyncLastError, prometheus.GaugeValue, float64(st.LastErrorMs)/1000, m.MirrorName, st.Task)
			}
		}
	}
	for _, s := range stats {
		lv := []string{s.Mirror, s.Topic, strconv.Itoa(int(s.Partition))}
		if counts[s.Mirror] == nil {
			counts[s.Mirror] = map[mirrorproto.State]int{}
		}
		counts[s.Mirror][s.State]++
		if s.Lag >= 0 {
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(s.Lag), lv...)
		}
		ch <- prometheus.MustNewConstMetric(descBytesFetched, prometheus.CounterValue, float64(s.BytesFetched), lv...)
		ch <- prometheus.MustNewConstMetric(descBytesAppended, prometheus.CounterValue, float64(s.BytesAppended), lv...)
		ch <- prometheus.MustNewConstMetric(descAppends, prometheus.CounterValue, float64(s.Appends), lv...)
		ch <- prometheus.MustNewConstMetric(descRecords, prometheus.CounterValue, float64(s.RecordsAppended), lv...)
		if s.SecondsBehind >= 0 {
			ch <- prometheus.MustNewConstMetric(descSecondsBehind, prometheus.GaugeValue, s.SecondsBehind, lv...)
		}
		ch <- prometheus.MustNewConstMetric(descSkipped, prometheus.GaugeValue, float64(s.SkippedOffsets), lv...)
		ch <- prometheus.MustNewConstMetric(descTruncated, prometheus.GaugeValue, float64(s.TruncatedRecords), lv...)
		ch <- prometheus.MustNewConstMetric(descPartState, prometheus.GaugeValue, 1, append(lv, s.State.String())...)
		if d, ok := described[key{s.Mirror, s.Topic, s.Partition}]; ok {
			if d.SourceOffset >= 0 {
				ch <- prometheus.MustNewConstMetric(descSourceHW, prometheus.GaugeValue, float64(d.SourceOffset), lv...)
			}
			if d.DestinationOffset >= 0 {
				ch <- prometheus.MustNewConstMetric(descLEO, prometheus.GaugeValue, float64(d.DestinationOffset), lv...)
			}
			ch <- prometheus.MustNewConstMetric(descRetry, prometheus.GaugeValue, float64(d.RetryAttempt), lv...)
		}
	}
	ch <- prometheus.MustNewConstMetric(descThrottle, prometheus.CounterValue, ms.ThrottleSeconds())
	for _, f := range ms.FetchStats() {
		ch <- prometheus.MustNewConstMetric(descFetchRequests, prometheus.CounterValue, float64(f.Requests), f.Mirror)
		ch <- prometheus.MustNewConstMetric(descFetchErrors, prometheus.CounterValue, float64(f.Errors), f.Mirror)
	}
	for m, byState := range counts {
		for _, st := range allStates {
			ch <- prometheus.MustNewConstMetric(descStateCount, prometheus.GaugeValue, float64(byState[st]), m, st.String())
		}
	}
}

// NewRegistry returns a registry holding the broker and mirror collector plus the Go
// runtime and process collectors of client_golang.
func NewRegistry(b Broker) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(b), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler returns the HTTP handler of the metrics endpoint (Prometheus text or
// OpenMetrics exposition, as the scraper asks).
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}
