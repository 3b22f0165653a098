package broker

// CreateTopics (Kafka's ControllerApis.createTopics): topics placed over the registered
// brokers (topics.go), with their configs validated against the topic definitions.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/controller"
	"github.com/kmirror/kmirror/internal/metadata"
)

func init() { register(kmsg.CreateTopics, 2, 7, (*Broker).handleCreateTopics) }

// validateTopicConfigs checks CreateTopics/alter configs against the topic definitions;
// the error is INVALID_CONFIG with a message naming the key.
func validateTopicConfigs(cfgs map[string]string) error {
	_, err := config.NewValues(config.Topic, cfgs, true)
	return err
}

func (b *Broker) handleCreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	if msg := b.createTopicsTooLarge(req); msg != "" {
		for _, rt := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, kerr.PolicyViolation.Code, strp(msg)
			st.NumPartitions, st.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		fail := func(e *kerr.Error, msg string) {
			st.ErrorCode = e.Code
			st.ErrorMessage = strp(msg)
			st.NumPartitions, st.ReplicationFactor = -1, -1
		}
		cfgs := map[string]string{}
		for _, c := range rt.Configs {
			if c.Value != nil {
				cfgs[c.Name] = *c.Value
			}
		}
		partitions := rt.NumPartitions
		if partitions == -1 {
			partitions = b.cfg.Int32("num.partitions")
		}
		rf := rt.ReplicationFactor
		if rf == -1 {
			rf = int16(b.cfg.Int32("default.replication.factor"))
		}
		switch {
		// Kafka's handleCreateTopicsRequest: CREATE on the cluster or on the topic.
		case !b.authorizeCluster(ctx, acl.OpCreate) && !b.authorize(ctx, acl.OpCreate, acl.ResourceTopic, rt.Topic):
			fail(kerr.TopicAuthorizationFailed, "Authorization failed.")
		case seen[rt.Topic] > 1:
			fail(kerr.InvalidRequest, "Create topics request from client contains the topic "+rt.Topic+" more than once")
		case validateTopicName(rt.Topic) != nil:
			fail(kerr.InvalidTopicException, validateTopicName(rt.Topic).Error())
		case b.meta.Image().Topics[rt.Topic] != nil:
			fail(kerr.TopicAlreadyExists, "Topic '"+rt.Topic+"' already exists.")
		case len(rt.ReplicaAssignment) > 0:
			fail(kerr.InvalidReplicaAssignment, "manual replica assignment is not supported by kmirror yet")
		case partitions <= 0:
			fail(kerr.InvalidPartitions, "Number of partitions must be larger than 0.")
		case rf <= 0:
			fail(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0.")
		case int(rf) > len(b.meta.Image().Brokers):
			fail(kerr.InvalidReplicationFactor, fmt.Sprintf("Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.", rf, rf, len(b.meta.Image().Brokers)))
		case validateTopicConfigs(cfgs) != nil:
			fail(kerr.InvalidConfig, validateTopicConfigs(cfgs).Error())
		case req.ValidateOnly:
			st.NumPartitions, st.ReplicationFactor = partitions, rf
		default:
			t, err := b.createTopic(ctx, rt.Topic, metadata.NewTopicID(), partitions, rf, cfgs, nil)
			var rfErr *controller.ErrInvalidReplicationFactor
			if errors.Is(err, metadata.ErrTopicExists) {
				fail(kerr.TopicAlreadyExists, "Topic '"+rt.Topic+"' already exists.")
				break
			} else if errors.As(err, &rfErr) {
				fail(kerr.InvalidReplicationFactor, "Unable to replicate the partition "+strconv.Itoa(int(rf))+" time(s): "+rfErr.Msg)
				break
			} else if e, ok := storageFailure(err); ok {
				fail(e, err.Error())
				break
			} else if err != nil {
				fail(kerr.UnknownServerError, err.Error())
				break
			}
			st.TopicID = t.ID
			st.NumPartitions, st.ReplicationFactor = partitions, rf
			// Kafka: the configs are returned only with DESCRIBE_CONFIGS on the topic.
			if b.authorize(ctx, acl.OpDescribeConfigs, acl.ResourceTopic, rt.Topic) {
				st.Configs = b.createTopicsConfigs(t)
			} else {
				st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// createTopicsTooLarge is the POLICY_VIOLATION message for a request Kafka's controller
// refuses as a whole, "" for one it accepts: more than maxPartitionsPerBatch partitions
// (validateTotalNumberOfPartitions), or more than maxRecordsPerUserOp metadata records
// (a topic record, its partition records and its config records per topic).
func (b *Broker) createTopicsTooLarge(req *kmsg.CreateTopicsRequest) string {
	partitions, records := 0, 0
	for _, rt := range req.Topics {
		n := int(rt.NumPartitions)
		switch {
		case len(rt.ReplicaAssignment) > 0:
			n = len(rt.ReplicaAssignment)
		case n == -1:
			n = int(b.cfg.Int32("num.partitions"))
		case n < 0:
			n = 0
		}
		partitions += n
		records += 1 + n + len(rt.Configs)
	}
	switch {
	case partitions > maxPartitionsPerBatch:
		return msgTooManyPartitions
	case records > maxRecordsPerUserOp:
		return msgTooManyRecords
	}
	return ""
}

func (b *Broker) createTopicsConfigs(t *metadata.Topic) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, name := range config.Topic.Names() {
		v, src := b.topicConfig(t, name)
		out = append(out, kmsg.CreateTopicsResponseTopicConfig{Name: name, Value: strp(v), Source: src})
	}
	return out
}
