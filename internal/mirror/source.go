package mirror

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// source is a mirror's connection to its source cluster: one franz-go client with the
// mirror's own connection and security settings (spec section 3), used with raw kmsg
// requests only.
type source struct {
	cl  *kgo.Client
	cfg *mirrorConfig
	// brokers maps source node IDs to host:port, from the last Metadata response; the
	// fetchers dial their own connections with it
	brokers atomic.Pointer[map[int32]string]
}

// brokerAddr returns the host:port of source broker id, "" when unknown.
func (s *source) brokerAddr(id int32) string {
	if m := s.brokers.Load(); m != nil {
		return (*m)[id]
	}
	return ""
}

func newSource(name string, cfg *mirrorConfig) (*source, error) {
	opts, err := cfg.clientOpts(name)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &source{cl: cl, cfg: cfg}, nil
}

func (s *source) close() { s.cl.Close() }

// sourceTopic is one topic of the source's metadata.
type sourceTopic struct {
	name       string
	id         metadata.TopicID
	partitions []kmsg.MetadataResponseTopicPartition
}

// sourceMeta is the part of a source Metadata response the mirror uses.
type sourceMeta struct {
	clusterID string
	topics    map[string]*sourceTopic
	// missing holds topics asked for that the source reported as unknown.
	missing map[string]bool
}

// errNoSourceMetadata is a Metadata answer listing no broker: the answering source broker
// has no cluster metadata yet (a ZooKeeper-based Kafka broker just restarted answers so
// until its controller's first UpdateMetadata, with every topic UNKNOWN_TOPIC_OR_PARTITION).
// Nothing in it is taken for the source's state; the caller retries.
var errNoSourceMetadata = errors.New("the source broker answered Metadata without any broker: it has no cluster metadata yet")

// metadata asks the source for topics (nil = all topics). An answer listing no broker is
// errNoSourceMetadata.
func (s *source) metadata(ctx context.Context, topics []string) (*sourceMeta, error) {
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, err
	}
	if len(resp.Brokers) == 0 {
		return nil, errNoSourceMetadata
	}
	addrs := make(map[int32]string, len(resp.Brokers))
	for _, b := range resp.Brokers {
		addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	s.brokers.Store(&addrs)
	m := &sourceMeta{topics: map[string]*sourceTopic{}, missing: map[string]bool{}}
	if resp.ClusterID != nil {
		m.clusterID = *resp.ClusterID
	}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		switch t.ErrorCode {
		case 0:
		case kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code:
			m.missing[*t.Topic] = true
			continue
		default:
			return nil, fmt.Errorf("source metadata for %s: %w", *t.Topic, kerr.ErrorForCode(t.ErrorCode))
		}
		m.topics[*t.Topic] = &sourceTopic{name: *t.Topic, id: t.TopicID, partitions: t.Partitions}
	}
	return m, nil
}

// clusterID resolves the source cluster ID through Metadata.
func (s *source) clusterID(ctx context.Context) (string, error) {
	m, err := s.metadata(ctx, []string{})
	if err != nil {
		return "", err
	}
	if m.clusterID == "" {
		return "", errors.New("the source did not report a cluster ID")
	}
	return m.clusterID, nil
}

// Special ListOffsets timestamps.
const (
	listLatest   int64 = -1
	listEarliest int64 = -2
)

// listOffset returns the source offset for ts (listLatest, listEarliest or a time in
// ms) of one partition; -1 when no record is at or after ts.
func (s *source) listOffset(ctx context.Context, topic string, partition int32, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, fmt.Errorf("source ListOffsets %s-%d: %w", topic, partition, err)
			}
			return p.Offset, nil
		}
	}
	return 0, fmt.Errorf("source ListOffsets %s-%d: partition missing from the response", topic, partition)
}

// errNoMirrorSupport means the source does not serve the mirror RPCs (not a kmirror
// cluster): LOG_ALIGNMENT then treats the mirror as one-way.
var errNoMirrorSupport = errors.New("the source does not serve DescribeClusterMirrors (not a kmirror cluster)")

// describeMirrors sends DescribeClusterMirrors (all mirrors) to the source with our
// cluster ID and the given last-mirror-position lookups (nil: none).
func (s *source) describeMirrors(ctx context.Context, ourClusterID string, lookups []mirrorproto.DescribeClusterMirrorsLookup) (*mirrorproto.DescribeClusterMirrorsResponse, error) {
	req := &mirrorproto.DescribeClusterMirrorsRequest{
		ClusterID:              &ourClusterID,
		LastMirrorEpochLookups: lookups,
	}
	kresp, err := s.cl.Request(ctx, req)
	if err != nil {
		if isUnsupported(err) {
			return nil, fmt.Errorf("%w: %v", errNoMirrorSupport, err)
		}
		return nil, err
	}
	resp, ok := kresp.(*mirrorproto.DescribeClusterMirrorsResponse)
	if !ok {
		return nil, fmt.Errorf("unexpected DescribeClusterMirrors response %T", kresp)
	}
	if resp.ErrorCode == kerr.UnsupportedVersion.Code || resp.ErrorCode == kerr.InvalidRequest.Code {
		return nil, fmt.Errorf("%w: %v", errNoMirrorSupport, mirrorproto.ErrorFor(resp.ErrorCode, resp.ErrorMessage))
	}
	if resp.ErrorCode != 0 {
		return nil, mirrorproto.ErrorFor(resp.ErrorCode, resp.ErrorMessage)
	}
	return resp, nil
}

// loopTopics returns the source topics that a mirror on the source mirrors from this
// cluster (ourClusterID) in a state other than STOPPED, by name, each with a one-line
// reason: starting one would make a mirror loop (spec section 4, LOG_ALIGNMENT step 1).
// A topic listed with no partition yet is being started there and counts too. A source
// without the mirror RPCs (Apache Kafka, Redpanda) mirrors nothing: an empty map.
func (s *source) loopTopics(ctx context.Context, ourClusterID string) (map[string]string, error) {
	resp, err := s.describeMirrors(ctx, ourClusterID, nil)
	if errors.Is(err, errNoMirrorSupport) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	return loopsIn(resp, ourClusterID), nil
}

// loopsIn picks loopTopics' answer out of a DescribeClusterMirrors response.
func loopsIn(resp *mirrorproto.DescribeClusterMirrorsResponse, ourClusterID string) map[string]string {
	loops := map[string]string{}
	for _, sm := range resp.Mirrors {
		if sm.ErrorCode != 0 || sm.SourceClusterID != ourClusterID {
			continue
		}
		for _, st := range sm.Topics {
			state := mirrorproto.StateUnknown // no partition yet: being started
			for _, sp := range st.Partitions {
				if state = sp.State; state != mirrorproto.StateStopped {
					break
				}
			}
			if state != mirrorproto.StateStopped {
				loops[st.TopicName] = fmt.Sprintf("mirror loop: the source mirrors %s from this cluster (mirror %s, %s)", st.TopicName, sm.MirrorName, state)
			}
		}
	}
	return loops
}

// isUnsupported reports a request the source cannot handle: franz-go refuses keys the
// broker's ApiVersions does not list, and a broker may answer UNSUPPORTED_VERSION.
func isUnsupported(err error) bool {
	if errors.Is(err, kerr.UnsupportedVersion) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "broker is too old") || strings.Contains(msg, "request key is unknown")
}
