package quickstart

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// admin talks to one cluster: topics and groups through kadm, mirrors through the
// mirrorproto requests (the client knows the mirror RPC keys).
type admin struct {
	addr string
	cl   *kgo.Client
	adm  *kadm.Client
}

func newAdmin(addr string) (*admin, error) {
	cl, err := kgo.NewClient(seeds(addr), kgo.MaxVersions(mirrorproto.ClientVersions()),
		kgo.DialTimeout(2*time.Second), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		return nil, err
	}
	return &admin{addr: addr, cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (a *admin) close() { a.cl.Close() }

// createTopic creates name with partitions partitions; an existing topic is fine.
func (a *admin) createTopic(ctx context.Context, name string, partitions int32) error {
	rs, err := a.adm.CreateTopics(ctx, partitions, 1, nil, name)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", name, r.Err)
		}
	}
	return nil
}

// createMirror sends CreateClusterMirror with bootstrap.servers=source; an existing
// mirror of that name is fine when exists is true.
func (a *admin) createMirror(ctx context.Context, name, source string, exists bool) error {
	req := &mirrorproto.CreateClusterMirrorRequest{MirrorName: name, Config: []mirrorproto.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: source}}}
	resp, err := a.cl.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("create mirror %s on %s: %w", name, a.addr, err)
	}
	cr := resp.(*mirrorproto.CreateClusterMirrorResponse)
	if err := mirrorproto.ErrorFor(cr.ErrorCode, cr.ErrorMessage); err != nil {
		if exists && strings.Contains(mirrorproto.Name(cr.ErrorCode), "EXISTS") {
			return nil
		}
		return fmt.Errorf("create mirror %s on %s: %w", name, a.addr, err)
	}
	return nil
}

// startMirror sends StartMirrorTopics for topic names and include patterns. Topics
// already in the mirror are fine when tolerant is true (a second quickstart run).
func (a *admin) startMirror(ctx context.Context, name string, topics, patterns []string, tolerant bool) error {
	req := mirrorproto.NewStartMirrorTopicsRequest()
	req.MirrorName = name
	for _, t := range topics {
		req.Topics = append(req.Topics, mirrorproto.StartMirrorTopicsRequestTopic{TopicName: t})
	}
	if len(patterns) > 0 {
		req.IncludePatterns = patterns
	}
	resp, err := a.cl.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("start mirror %s: %w", name, err)
	}
	sr := resp.(*mirrorproto.StartMirrorTopicsResponse)
	return topicErrors("start mirror "+name, sr.ErrorCode, sr.ErrorMessage, sr.Topics, tolerant)
}

// stopMirror sends StopMirrorTopics (failover, spec §5); it answers once every
// partition is STOPPED and the topics are writable.
func (a *admin) stopMirror(ctx context.Context, name string, topics ...string) error {
	req := mirrorproto.NewStopMirrorTopicsRequest()
	req.MirrorName = name
	for _, t := range topics {
		req.Topics = append(req.Topics, mirrorproto.TopicName{TopicName: t})
	}
	resp, err := a.cl.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("stop mirror %s: %w", name, err)
	}
	sr := resp.(*mirrorproto.StopMirrorTopicsResponse)
	return topicErrors("stop mirror "+name, sr.ErrorCode, sr.ErrorMessage, sr.Topics, false)
}

func topicErrors(what string, code int16, msg *string, topics []mirrorproto.TopicResult, tolerant bool) error {
	if err := mirrorproto.ErrorFor(code, msg); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, t := range topics {
		if t.ErrorCode != 0 && !tolerant {
			return fmt.Errorf("%s: topic %s: %w", what, t.Name, mirrorproto.ErrorFor(t.ErrorCode, t.ErrorMessage))
		}
	}
	return nil
}

// PartitionRow is one line of the live table: a mirror partition as
// DescribeClusterMirrors reports it (offsets are -1 while unknown).
type PartitionRow struct {
	Mirror            string
	Topic             string
	Partition         int32
	SourceOffset      int64 // source high watermark of the latest fetch response
	DestinationOffset int64 // destination log end offset
	Lag               int64 // max(0, SourceOffset - DestinationOffset); -1 when unknown
	State             string
	TruncatedRecords  int64 // records dropped by the last LOG_ALIGNMENT (failback)
}

// describe returns the partitions of mirror name, sorted by topic and partition.
func (a *admin) describe(ctx context.Context, name string) ([]PartitionRow, error) {
	return a.describeMirrors(ctx, []string{name})
}

// mirrorInfo is one mirror of a cluster as DescribeClusterMirrors (all mirrors) lists it.
type mirrorInfo struct {
	Name, Source string
	Rows         []PartitionRow
}

// describeAll returns every mirror on the cluster, sorted by name, with its partitions.
func (a *admin) describeAll(ctx context.Context) ([]mirrorInfo, error) {
	resp, err := a.cl.Request(ctx, &mirrorproto.DescribeClusterMirrorsRequest{})
	if err != nil {
		return nil, err
	}
	dr := resp.(*mirrorproto.DescribeClusterMirrorsResponse)
	if err := mirrorproto.ErrorFor(dr.ErrorCode, dr.ErrorMessage); err != nil {
		return nil, err
	}
	var ms []mirrorInfo
	for _, m := range dr.Mirrors {
		if mirrorproto.ErrorFor(m.ErrorCode, m.ErrorMessage) != nil {
			continue
		}
		mi := mirrorInfo{Name: m.MirrorName, Source: m.SourceBootstrap}
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				mi.Rows = append(mi.Rows, PartitionRow{Mirror: m.MirrorName, Topic: t.TopicName, Partition: p.PartitionIndex, SourceOffset: p.SourceOffset,
					DestinationOffset: p.DestinationOffset, Lag: p.Lag, State: p.State.String(), TruncatedRecords: p.TruncatedRecords})
			}
		}
		sortRows(mi.Rows)
		ms = append(ms, mi)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	return ms, nil
}

func sortRows(rows []PartitionRow) {
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Topic != rows[j].Topic {
			return rows[i].Topic < rows[j].Topic
		}
		return rows[i].Partition < rows[j].Partition
	})
}

// describeMirrors returns the partitions of the named mirrors, sorted by topic and partition.
func (a *admin) describeMirrors(ctx context.Context, names []string) ([]PartitionRow, error) {
	resp, err := a.cl.Request(ctx, &mirrorproto.DescribeClusterMirrorsRequest{MirrorNames: names})
	if err != nil {
		return nil, err
	}
	dr := resp.(*mirrorproto.DescribeClusterMirrorsResponse)
	if err := mirrorproto.ErrorFor(dr.ErrorCode, dr.ErrorMessage); err != nil {
		return nil, err
	}
	var rows []PartitionRow
	for _, m := range dr.Mirrors {
		if err := mirrorproto.ErrorFor(m.ErrorCode, m.ErrorMessage); err != nil {
			return nil, err
		}
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				rows = append(rows, PartitionRow{Mirror: m.MirrorName, Topic: t.TopicName, Partition: p.PartitionIndex, SourceOffset: p.SourceOffset,
					DestinationOffset: p.DestinationOffset, Lag: p.Lag, State: p.State.String(), TruncatedRecords: p.TruncatedRecords})
			}
		}
	}
	sortRows(rows)
	return rows, nil
}

// waitState polls describe until the topic has partitions partitions, all in state
// and (for MIRRORING) at lag 0 with the destination at the source's offset, for at
// most timeout. It returns the last rows seen.
func (a *admin) waitState(ctx context.Context, name, topic string, partitions int, state string, timeout time.Duration) ([]PartitionRow, error) {
	deadline := time.Now().Add(timeout)
	var last []PartitionRow
	var lastErr error
	for {
		rows, err := a.describe(ctx, name)
		lastErr = err
		if err == nil {
			last = rows
			n := 0
			for _, r := range rows {
				if r.Topic != topic || r.State != state {
					continue
				}
				if state == "MIRRORING" && (r.Lag != 0 || r.SourceOffset < 0 || r.DestinationOffset != r.SourceOffset) {
					continue
				}
				n++
			}
			if n == partitions {
				return rows, nil
			}
		}
		if time.Now().After(deadline) {
			if lastErr != nil {
				return last, fmt.Errorf("mirror %s on %s: %w", name, a.addr, lastErr)
			}
			return last, fmt.Errorf("mirror %s on %s: topic %s not %s within %s: %s", name, a.addr, topic, state, timeout, summarize(last))
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func summarize(rows []PartitionRow) string {
	var s []string
	for _, r := range rows {
		s = append(s, fmt.Sprintf("%s-%d %s lag %d", r.Topic, r.Partition, r.State, r.Lag))
	}
	if len(s) == 0 {
		return "no partitions"
	}
	return strings.Join(s, ", ")
}

// groupOffsets returns the committed offsets of group on topic, by partition.
func (a *admin) groupOffsets(ctx context.Context, group, topic string) (map[int32]int64, error) {
	rs, err := a.adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	if err := rs.Error(); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range rs[topic] {
		if o.Err == nil && o.At >= 0 {
			out[p] = o.At
		}
	}
	return out, nil
}
