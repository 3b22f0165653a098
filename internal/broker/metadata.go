package broker

// Metadata (Kafka's KafkaApis.handleTopicMetadataRequest): the alive brokers of the
// request's listener, the controller ID for clients and the topics of the applied image;
// a missing topic is created when the request and auto.create.topics.enable allow it.
// Authorization as Kafka's: the topics without DESCRIBE are left out of an all-topics
// request and answered TOPIC_AUTHORIZATION_FAILED when named; auto-creation needs CREATE
// on the cluster or the topic; the authorized-operations fields are filled when asked.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/metadata"
)

func init() { register(kmsg.Metadata, 0, 12, (*Broker).handleMetadata) }

func (b *Broker) handleMetadata(ctx context.Context, req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	im := b.rm.Image()
	listener := b.listenerOf(ctx)
	for _, br := range b.aliveBrokers(im, listener) {
		e, _ := br.Endpoint(listener)
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = br.ID, e.Host, e.Port
		if br.Rack != "" {
			mb.Rack = strp(br.Rack)
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	resp.ClusterID = strp(b.ClusterID())
	resp.ControllerID = b.controllerIDForClients(im, listener)
	var topics []*metadata.Topic
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, name := range im.TopicNames() {
			if b.authorize(ctx, acl.OpDescribe, acl.ResourceTopic, name) {
				topics = append(topics, im.Topics[name])
			}
		}
	} else {
		for _, rt := range req.Topics {
			var t *metadata.Topic
			name := ""
			if rt.Topic != nil {
				name = *rt.Topic
				t = im.Topics[name]
			} else if rt.TopicID != [16]byte{} {
				t = im.TopicsByID[rt.TopicID]
			}
			if t != nil && name == "" {
				name = t.Name
			}
			if name != "" && !b.authorize(ctx, acl.OpDescribe, acl.ResourceTopic, name) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				if rt.Topic != nil {
					mt.Topic = strp(name)
				} else {
					mt.TopicID = rt.TopicID
				}
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			if t == nil && name != "" && (req.Version < 4 || req.AllowAutoTopicCreation) && b.cfg.Bool("auto.create.topics.enable") && !isInternalTopic(name) &&
				!b.authorizeCluster(ctx, acl.OpCreate) && !b.authorize(ctx, acl.OpCreate, acl.ResourceTopic, name) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.ErrorCode, mt.Topic = kerr.TopicAuthorizationFailed.Code, strp(name)
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			if t == nil && name != "" && (req.Version < 4 || req.AllowAutoTopicCreation) && b.cfg.Bool("auto.create.topics.enable") && !isInternalTopic(name) {
				if validateTopicName(name) == nil {
					if err := b.autoCreate(ctx, name); err == nil {
						t = b.rm.Image().Topics[name]
					}
				}
			}
			if t == nil {
				code := kerr.UnknownTopicOrPartition.Code
				if name != "" && validateTopicName(name) != nil {
					code = kerr.InvalidTopicException.Code
				}
				mt := kmsg.NewMetadataResponseTopic()
				mt.ErrorCode = code
				if name != "" {
					mt.Topic = strp(name)
				} else {
					mt.TopicID = rt.TopicID
				}
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			topics = append(topics, t)
		}
	}
	for _, t := range topics {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = strp(t.Name)
		mt.TopicID = t.ID
		mt.IsInternal = isInternalTopic(t.Name)
		if req.IncludeTopicAuthorizedOperations {
			mt.AuthorizedOperations = b.authorizedOperations(ctx, acl.ResourceTopic, t.Name)
		}
		for p := int32(0); p < t.Partitions; p++ {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = p
			mp.Leader, mp.LeaderEpoch, mp.Replicas, mp.ISR, mp.OfflineReplicas = b.partitionView(im, t, p)
			if mp.Leader == metadata.NoLeader {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	if req.IncludeClusterAuthorizedOperations && req.Version <= 10 {
		resp.AuthorizedOperations = b.authorizedOperations(ctx, acl.ResourceCluster, acl.ClusterName)
	}
	return resp
}
