package broker

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/storage"
)

// producerIDs hands out producer IDs from blocks that the active controller allocates
// (Kafka's RPCProducerIdManager over AllocateProducerIds): no two brokers of the cluster,
// and no restart, ever hand out the same ID.
type producerIDs struct {
	b         *Broker
	mu        sync.Mutex
	next, end int64
}

// openProducerIDs returns the broker's producer-ID source. A data directory written by a
// release before clusters kept the end of its last block in legacyFile: the metadata log
// takes it over (no block below it is ever handed out again) and the file is removed.
func openProducerIDs(b *Broker, legacyFile string) (*producerIDs, error) {
	data, err := os.ReadFile(legacyFile)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if err == nil {
		n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", legacyFile, err)
		}
		if n > b.meta.Image().NextProducerID {
			ctx, cancel := context.WithTimeout(b.ctx, startTimeout)
			defer cancel()
			if _, err := b.meta.Apply(ctx, metadata.ProducerIDsRecord{BrokerID: b.nodeID, BrokerEpoch: -1, NextProducerID: n}); err != nil {
				return nil, fmt.Errorf("moving %s into the metadata log: %w", legacyFile, err)
			}
		}
		if err := os.Remove(legacyFile); err != nil {
			return nil, err
		}
	}
	return &producerIDs{b: b}, nil
}

// Next returns a producer ID never handed out before in this cluster; when the block is
// used up it asks the controller for the next one (errors: no controller answered).
func (p *producerIDs) Next() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID, req.BrokerEpoch = p.b.nodeID, p.b.life.BrokerEpoch()
		ctx, cancel := context.WithTimeout(p.b.ctx, 10*time.Second)
		resp, err := p.b.channel.Request(ctx, req)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("allocating producer IDs: %w", err)
		}
		r := resp.(*kmsg.AllocateProducerIDsResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return 0, fmt.Errorf("allocating producer IDs: %w", err)
		}
		p.next, p.end = r.ProducerIDStart, r.ProducerIDStart+int64(r.ProducerIDLen)
	}
	id := p.next
	p.next++
	return id, nil
}

// topicConfig resolves a topic's effective config value: the topic's own setting, else
// the broker's (dynamic, then static) value of its synonym, else the default.
func (b *Broker) topicConfig(t *metadata.Topic, name string) (value string, source int8) {
	if v, ok := t.Configs[name]; ok {
		return v, sourceDynamicTopic
	}
	return b.topicDefault(name)
}

// topicDefault is a topic config's value when the topic does not set it.
func (b *Broker) topicDefault(name string) (string, int8) {
	d := config.Topic[name]
	if d == nil {
		return "", sourceDefault
	}
	if d.Synonym != "" {
		if v, ok := b.meta.Image().BrokerConfigs[d.Synonym]; ok {
			return v, sourceDynamicDefaultBroker
		}
		if v, ok := b.cfg.Get(d.Synonym); ok {
			return v, sourceStaticBroker
		}
		if bd := config.Broker[d.Synonym]; bd != nil {
			return bd.Default, sourceDefault
		}
	}
	return d.Default, sourceDefault
}

func (b *Broker) topicInt(t *metadata.Topic, name string) int64 {
	v, _ := b.topicConfig(t, name)
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// storageConfig builds the log settings of a topic. Its logs' high watermarks are the
// partition layer's (ExternalHighWatermark): a leader moves it with its ISR, a follower
// takes the leader's, and a restart starts from replication-offset-checkpoint.
func (b *Broker) storageConfig(t *metadata.Topic) storage.Config {
	c := storage.DefaultConfig()
	c.ExternalHighWatermark = true
	c.SegmentBytes = b.topicInt(t, "segment.bytes")
	c.SegmentMs = b.topicInt(t, "segment.ms")
	c.RetentionMs = b.topicInt(t, "retention.ms")
	c.RetentionBytes = b.topicInt(t, "retention.bytes")
	c.IndexIntervalBytes = int32(b.topicInt(t, "index.interval.bytes"))
	c.SegmentIndexBytes = int32(b.topicInt(t, "segment.index.bytes"))
	c.FlushIntervalMessages = b.topicInt(t, "flush.messages")
	c.FlushIntervalMs = b.topicInt(t, "flush.ms")
	c.CleanupPolicy, _ = b.topicConfig(t, "cleanup.policy")
	c.DeleteRetentionMs = b.topicInt(t, "delete.retention.ms")
	c.MinCompactionLagMs = b.topicInt(t, "min.compaction.lag.ms")
	c.MaxCompactionLagMs = b.topicInt(t, "max.compaction.lag.ms")
	if v, _ := b.topicConfig(t, "min.cleanable.dirty.ratio"); v != "" {
		c.MinCleanableDirtyRatio, _ = strconv.ParseFloat(v, 64)
	}
	return c
}

// Config sources of DescribeConfigs (Kafka's ConfigSource).
const (
	sourceDynamicTopic         int8 = 1
	sourceDynamicBroker        int8 = 2
	sourceDynamicDefaultBroker int8 = 3
	sourceStaticBroker         int8 = 4
	sourceDefault              int8 = 5
)

// topicIDString renders a topic ID as Kafka's Uuid.toString does (base64url, no padding).
func topicIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func nowMs() int64 { return time.Now().UnixMilli() }
