package console

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirror"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// ClusterView is the cluster section of the console and of /api/cluster.
type ClusterView struct {
	ClusterID string `json:"clusterId"`
	NodeID    int32  `json:"nodeId"`
	// Controller is the active controller's node ID, -1 when none is known.
	Controller                int32        `json:"controller"`
	Brokers                   []BrokerView `json:"brokers"`
	Topics                    int          `json:"topics"`
	Partitions                int          `json:"partitions"`
	UnderReplicatedPartitions int          `json:"underReplicatedPartitions"`
	OfflinePartitions         int          `json:"offlinePartitions"`
}

// BrokerView is one registered broker.
type BrokerView struct {
	ID        int32    `json:"id"`
	Endpoints []string `json:"endpoints"`
	Rack      string   `json:"rack,omitempty"`
	Fenced    bool     `json:"fenced"`
}

// TopicView is one topic of the topics section and of /api/topics.
type TopicView struct {
	Name              string `json:"name"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int    `json:"replicationFactor"`
	UnderReplicated   int    `json:"underReplicatedPartitions"`
	Internal          bool   `json:"internal"`
	// Mirror is the cluster mirror owning a mirror topic ("" for an ordinary topic).
	Mirror string `json:"mirror,omitempty"`
}

// GroupView is one consumer group with its lag: log end offset minus the committed
// offset, summed over the partitions with a commit (kadm.Lag).
type GroupView struct {
	Group   string `json:"group"`
	State   string `json:"state"`
	Members int    `json:"members"`
	Topics  string `json:"topics"`
	Lag     int64  `json:"lag"`
	// BeyondLogEnd counts partitions whose committed offset is past the log end offset
	// (a truncated or recreated topic): their lag is not counted as 0 but flagged.
	BeyondLogEnd int    `json:"beyondLogEnd"`
	Error        string `json:"error,omitempty"`
}

// MirrorView is one cluster mirror of the mirrors section and of /api/mirrors.
type MirrorView struct {
	Name            string `json:"name"`
	SourceBootstrap string `json:"sourceBootstrap"`
	SourceClusterID string `json:"sourceClusterId"`
	Error           string `json:"error,omitempty"`
	// FailoverLossRecords is the data a failover would lose now: the lag in records summed
	// over the partitions still fetching from the source (STOPPED ones excluded), the
	// partitions of unknown lag not counted (UnknownLagPartitions of them).
	FailoverLossRecords  int64 `json:"failoverLossRecords"`
	UnknownLagPartitions int   `json:"unknownLagPartitions"`
	// MaxSecondsBehind is the largest seconds-behind of its partitions, -1 when unknown.
	MaxSecondsBehind float64         `json:"maxSecondsBehind"`
	States           map[string]int  `json:"states"`
	Partitions       []PartitionView `json:"partitions"`
	SyncTasks        []SyncTaskView  `json:"syncTasks"`
	History          []Sample        `json:"history"`
	Graph            Graph           `json:"-"`
}

// PartitionView is one mirror partition. Offsets and lag are -1 when unknown;
// SecondsBehind is -1 when unknown (only the broker leading the partition knows it).
type PartitionView struct {
	Topic             string  `json:"topic"`
	Partition         int32   `json:"partition"`
	State             string  `json:"state"`
	SourceOffset      int64   `json:"sourceOffset"`
	DestinationOffset int64   `json:"destinationOffset"`
	Lag               int64   `json:"lag"`
	SecondsBehind     float64 `json:"secondsBehind"`
	RetryAttempt      int32   `json:"retryAttempt"`
	Error             string  `json:"error,omitempty"`
	SkippedOffsets    int64   `json:"skippedOffsets"`
	// TruncatedOffset and TruncatedRecords are the last failback's truncation report
	// (spec section 15); TruncatedOffset is -1 when there is none.
	TruncatedOffset  int64 `json:"truncatedOffset"`
	TruncatedRecords int64 `json:"truncatedRecords"`
}

// SyncTaskView is one periodic metadata sync task of a mirror (spec section 9). Times are
// Unix milliseconds, -1 for never.
type SyncTaskView struct {
	Task          string `json:"task"`
	LastSuccessMs int64  `json:"lastSuccessMs"`
	LastErrorMs   int64  `json:"lastErrorMs"`
	LastError     string `json:"lastError,omitempty"`
	ErrorCount    int64  `json:"errorCount"`
}

// clusterView reads the metadata image.
func (s *Server) clusterView() ClusterView {
	im := s.b.Metadata().Image()
	v := ClusterView{ClusterID: im.ClusterID, NodeID: s.b.NodeID(), Controller: -1, Topics: len(im.Topics)}
	if id, _, ok := s.b.Metadata().Leader(); ok {
		v.Controller = id
	}
	for _, br := range im.Brokers {
		bv := BrokerView{ID: br.ID, Rack: br.Rack, Fenced: br.Fenced}
		for _, e := range br.Endpoints {
			bv.Endpoints = append(bv.Endpoints, e.Name+"://"+e.Host+":"+itoa(int64(e.Port)))
		}
		v.Brokers = append(v.Brokers, bv)
	}
	sort.Slice(v.Brokers, func(i, j int) bool { return v.Brokers[i].ID < v.Brokers[j].ID })
	for _, t := range im.Topics {
		v.Partitions += int(t.Partitions)
		for _, p := range t.Registrations {
			if p == nil || !p.Assigned() {
				continue
			}
			if len(p.ISR) < len(p.Replicas) {
				v.UnderReplicatedPartitions++
			}
			if p.Leader == metadata.NoLeader {
				v.OfflinePartitions++
			}
		}
	}
	return v
}

// topicViews lists the topics of the metadata image by name.
func (s *Server) topicViews() []TopicView {
	im := s.b.Metadata().Image()
	out := make([]TopicView, 0, len(im.Topics))
	for _, t := range im.Topics {
		tv := TopicView{Name: t.Name, Partitions: t.Partitions, Internal: strings.HasPrefix(t.Name, "__")}
		if t.Mirror != nil {
			tv.Mirror = t.Mirror.MirrorName
		}
		for i, p := range t.Registrations {
			if p == nil {
				continue
			}
			if i == 0 {
				tv.ReplicationFactor = len(p.Replicas)
			}
			if p.Assigned() && len(p.ISR) < len(p.Replicas) {
				tv.UnderReplicated++
			}
		}
		out = append(out, tv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// groupViews lists the consumer groups of the cluster with their lag, through a client
// of this broker's own listener (the cluster's coordinators may be other brokers).
func (s *Server) groupViews(ctx context.Context) ([]GroupView, error) {
	adm, err := s.admin()
	if err != nil {
		return nil, err
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	lags, err := adm.Lag(ctx, listed.Groups()...)
	if err != nil {
		return nil, err
	}
	out := make([]GroupView, 0, len(lags))
	for _, l := range lags.Sorted() {
		gv := GroupView{Group: l.Group, State: l.State, Members: len(l.Members)}
		if e := l.Error(); e != nil {
			gv.Error = e.Error()
		}
		topics := map[string]bool{}
		for _, ml := range l.Lag.Sorted() {
			topics[ml.Topic] = true
			switch {
			case ml.Err != nil, ml.Commit.At < 0: // no commit: no lag, as kafka-consumer-groups.sh's "-"
			case ml.Commit.At > ml.End.Offset:
				gv.BeyondLogEnd++
			case ml.Lag > 0:
				gv.Lag += ml.Lag
			}
		}
		names := make([]string, 0, len(topics))
		for t := range topics {
			names = append(names, t)
		}
		sort.Strings(names)
		gv.Topics = strings.Join(names, ", ")
		out = append(out, gv)
	}
	return out, nil
}

// statsKey names one mirror partition.
type statsKey struct {
	mirror, topic string
	partition     int32
}

// mirrorViews describes every cluster mirror (DescribeClusterMirrors of the whole
// cluster) with this broker's seconds-behind and the in-memory lag history.
func (s *Server) mirrorViews(ctx context.Context) []MirrorView {
	ms := s.b.MirrorService()
	if ms == nil {
		return nil
	}
	secs := map[statsKey]float64{}
	if st, ok := ms.(interface{ Stats() []mirror.PartitionStat }); ok {
		for _, p := range st.Stats() {
			secs[statsKey{p.Mirror, p.Topic, p.Partition}] = p.SecondsBehind
		}
	}
	resp := ms.DescribeClusterMirrors(ctx, &mirrorproto.DescribeClusterMirrorsRequest{})
	out := make([]MirrorView, 0, len(resp.Mirrors))
	for _, m := range resp.Mirrors {
		mv := MirrorView{Name: m.MirrorName, SourceBootstrap: m.SourceBootstrap, SourceClusterID: m.SourceClusterID,
			MaxSecondsBehind: -1, States: map[string]int{}, Partitions: []PartitionView{}, SyncTasks: []SyncTaskView{}}
		if m.ErrorCode != 0 {
			mv.Error = mirrorproto.ErrorFor(m.ErrorCode, m.ErrorMessage).Error()
		}
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				pv := PartitionView{Topic: t.TopicName, Partition: p.PartitionIndex, State: p.State.String(),
					SourceOffset: p.SourceOffset, DestinationOffset: p.DestinationOffset, Lag: p.Lag, SecondsBehind: -1,
					RetryAttempt: p.RetryAttempt, SkippedOffsets: p.SkippedOffsets,
					TruncatedOffset: p.TruncatedOffset, TruncatedRecords: p.TruncatedRecords}
				if p.ErrorMessage != nil {
					pv.Error = *p.ErrorMessage
				}
				if sb, ok := secs[statsKey{m.MirrorName, t.TopicName, p.PartitionIndex}]; ok {
					pv.SecondsBehind = sb
				}
				mv.States[pv.State]++
				if p.State != mirrorproto.StateStopped && p.State != mirrorproto.StateStopping {
					if p.Lag < 0 {
						mv.UnknownLagPartitions++
					} else {
						mv.FailoverLossRecords += p.Lag
					}
					if pv.SecondsBehind > mv.MaxSecondsBehind {
						mv.MaxSecondsBehind = pv.SecondsBehind
					}
				}
				mv.Partitions = append(mv.Partitions, pv)
			}
		}
		sort.Slice(mv.Partitions, func(i, j int) bool {
			a, b := mv.Partitions[i], mv.Partitions[j]
			return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
		})
		for _, st := range m.SyncTasks {
			tv := SyncTaskView{Task: st.Task, LastSuccessMs: st.LastSuccessMs, LastErrorMs: st.LastErrorMs, ErrorCount: st.ErrorCount}
			if st.LastError != nil {
				tv.LastError = *st.LastError
			}
			mv.SyncTasks = append(mv.SyncTasks, tv)
		}
		mv.History = s.history.samples(m.MirrorName)
		mv.Graph = renderGraph(mv.History, time.Now())
		out = append(out, mv)
	}
	return out
}

// admin is a kadm client of this broker's listener, created on first use.
func (s *Server) admin() (*kadm.Client, error) {
	s.admOnce.Do(func() { s.adm, s.admCl, s.admErr = newAdmin(s.b.Addr()) })
	return s.adm, s.admErr
}
