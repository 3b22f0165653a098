package broker

// Topic administration and cluster description: Metadata v0–12, DescribeCluster v0–1,
// CreateTopics v2–7, DeleteTopics v1–6, CreatePartitions v0–3 (Kafka's KafkaApis and
// ControllerApis): metadata from the applied image, topics placed over the registered
// brokers.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/controller"
	"github.com/kmirror/kmirror/internal/metadata"
)

var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// validateTopicName follows Kafka's Topic.validate: INVALID_TOPIC_EXCEPTION.
func validateTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	case len(name) > 249:
		return fmt.Errorf("topic name is longer than 249 characters")
	case !legalTopic.MatchString(name):
		return fmt.Errorf("topic name %q contains characters other than ASCII alphanumerics, '.', '_' and '-'", name)
	}
	return nil
}

func strp(s string) *string { return &s }

func isInternalTopic(name string) bool {
	return name == OffsetsTopic || name == "__mirror_state" || name == "__transaction_state"
}

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
			topics = append(topics, im.Topics[name])
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
	return resp
}

// aliveBrokers are the brokers clients of listener may talk to: registered, unfenced and
// with an endpoint on that listener, by ID (as Kafka's
// KRaftMetadataCache.getAliveBrokerNodes, which leaves fenced brokers out).
func (b *Broker) aliveBrokers(im *metadata.Image, listener string) []*metadata.BrokerRegistration {
	var out []*metadata.BrokerRegistration
	for _, id := range im.BrokerIDs() {
		if br := im.Brokers[id]; !br.Fenced {
			if _, ok := br.Endpoint(listener); ok {
				out = append(out, br)
			}
		}
	}
	return out
}

// controllerIDForClients is the ControllerID of Metadata and DescribeCluster for
// clients: KRaft controllers are not reachable on client listeners, so Kafka answers an
// alive broker; kmirror answers the active controller's node when it is an alive broker,
// else the lowest alive broker ID (−1 when none).
func (b *Broker) controllerIDForClients(im *metadata.Image, listener string) int32 {
	alive := b.aliveBrokers(im, listener)
	if id, ok := b.activeControllerID(); ok {
		for _, br := range alive {
			if br.ID == id {
				return id
			}
		}
	}
	if len(alive) > 0 {
		return alive[0].ID
	}
	return -1
}

// activeControllerID is the node ID of the active controller, false when unknown.
func (b *Broker) activeControllerID() (int32, bool) {
	if b.ActiveController() {
		return b.nodeID, true
	}
	if id, _, ok := b.meta.Leader(); ok {
		return id, true
	}
	return -1, false
}

// partitionView is what Metadata and DescribeTopicPartitions say of a partition: its
// leader, leader epoch (this broker's own when it leads it), replicas, ISR and the
// replicas on brokers that are fenced or not registered.
func (b *Broker) partitionView(im *metadata.Image, t *metadata.Topic, p int32) (leader, epoch int32, replicas, isr, offline []int32) {
	reg := t.Partition(p)
	leader, epoch = reg.Leader, reg.LeaderEpoch
	if part := b.rm.Get(t.Name, p); part != nil && part.IsLeader() {
		epoch = part.LeaderEpoch()
	}
	replicas, isr = append([]int32{}, reg.Replicas...), append([]int32{}, reg.ISR...)
	for _, r := range reg.Replicas {
		if br, ok := im.Brokers[r]; !ok || br.Fenced {
			offline = append(offline, r)
		}
	}
	return leader, epoch, replicas, isr, offline
}

// autoCreate creates a topic with num.partitions and default.replication.factor, as
// Kafka's AutoTopicCreationManager.
func (b *Broker) autoCreate(ctx context.Context, name string) error {
	_, err := b.createTopic(ctx, name, metadata.NewTopicID(), b.cfg.Int32("num.partitions"), b.defaultReplicationFactor(), nil, nil)
	if errors.Is(err, metadata.ErrTopicExists) {
		return nil
	}
	return err
}

// defaultReplicationFactor is default.replication.factor.
func (b *Broker) defaultReplicationFactor() int16 {
	return int16(b.cfg.Int32("default.replication.factor"))
}

// maxReplicationFactor is the largest replication factor kmirror places: partitions have
// one replica until replication exists.
const maxReplicationFactor = 1

// createTopic writes the topic record with the partitions' placement (striped over the
// registered brokers) and opens the logs of the partitions placed here. A placement
// computed from an image older than the brokers' state is computed again. Errors: those
// of metadata Apply and *controller.ErrInvalidReplicationFactor.
func (b *Broker) createTopic(ctx context.Context, name string, id metadata.TopicID, partitions int32, rf int16, configs map[string]string, mirror *metadata.MirrorTopic) (*metadata.Topic, error) {
	if configs == nil {
		configs = map[string]string{}
	}
	rf = min(rf, maxReplicationFactor)
	for attempt := 0; ; attempt++ {
		assign, err := controller.Place(b.meta.Image(), partitions, rf, nil, newRand())
		if err != nil {
			return nil, err
		}
		recs := []metadata.Record{&metadata.TopicRecord{Name: name, ID: id, Partitions: partitions, Configs: configs, Mirror: mirror}}
		recs = append(recs, partitionRecords(id, 0, assign)...)
		im, err := b.meta.Apply(ctx, recs...)
		if errors.Is(err, metadata.ErrStalePlacement) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, err
		}
		b.applyNow()
		return im.Topics[name], nil
	}
}

// partitionRecords are the PartitionRecords of new partitions from first on, with the
// replicas assign gives them: all in the ISR, led by the first.
func partitionRecords(id metadata.TopicID, first int32, assign [][]int32) []metadata.Record {
	out := make([]metadata.Record, 0, len(assign))
	for i, replicas := range assign {
		out = append(out, metadata.PartitionRecord{TopicID: id, Partition: first + int32(i), Replicas: replicas, ISR: replicas, Leader: replicas[0]})
	}
	return out
}

func newRand() *rand.Rand { return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) }

// CreateTopic creates a topic with a given topic ID (mirror.Local): an existing topic
// with the same name and ID succeeds and gets the mirror association, another ID is an
// error (spec §2).
func (b *Broker) CreateTopic(ctx context.Context, name string, id metadata.TopicID, partitions int32, configs map[string]string, mirror *metadata.MirrorTopic) error {
	if t, ok := b.meta.Image().Topics[name]; ok {
		if t.ID != id {
			return fmt.Errorf("topic %s already exists on the destination with topic ID %s, not the source's %s", name, topicIDString(t.ID), topicIDString(id))
		}
		if mirror != nil {
			if _, err := b.meta.Apply(ctx, &metadata.MirrorTopicRecord{Topic: name, Mirror: mirror}); err != nil {
				return err
			}
		}
		b.applyNow()
		return nil
	}
	if _, internal := internalTopicRF[name]; internal {
		return b.ensureInternalTopic(name, partitions, configs)
	}
	_, err := b.createTopic(ctx, name, id, partitions, b.defaultReplicationFactor(), configs, mirror)
	return err
}

// CreatePartitions grows a topic (mirror.Local, for source partition growth), placing the
// new partitions after the existing ones.
func (b *Broker) CreatePartitions(ctx context.Context, name string, count int32) error {
	for attempt := 0; ; attempt++ {
		im := b.meta.Image()
		t := im.Topics[name]
		if t == nil {
			return fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
		}
		if count <= t.Partitions {
			return fmt.Errorf("%w: topic %q has %d partitions, cannot change to %d", metadata.ErrInvalidPartitions, name, t.Partitions, count)
		}
		rf := int16(max(1, len(t.Partition(0).Replicas)))
		assign, err := controller.Place(im, count-t.Partitions, rf, t.Registrations, newRand())
		if err != nil {
			return err
		}
		recs := append([]metadata.Record{&metadata.PartitionCountRecord{Name: name, Partitions: count}}, partitionRecords(t.ID, t.Partitions, assign)...)
		_, err = b.meta.Apply(ctx, recs...)
		if errors.Is(err, metadata.ErrStalePlacement) && attempt < 3 {
			continue
		}
		if err != nil {
			return err
		}
		b.applyNow()
		return nil
	}
}

func (b *Broker) handleDescribeCluster(ctx context.Context, req *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	resp.ClusterID = b.ClusterID()
	im := b.rm.Image()
	listener := b.listenerOf(ctx)
	resp.ControllerID = b.controllerIDForClients(im, listener)
	resp.ClusterAuthorizedOperations = -2147483648
	for _, br := range b.aliveBrokers(im, listener) {
		e, _ := br.Endpoint(listener)
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port = br.ID, e.Host, e.Port
		if br.Rack != "" {
			db.Rack = strp(br.Rack)
		}
		resp.Brokers = append(resp.Brokers, db)
	}
	return resp
}

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
		case rf > maxReplicationFactor:
			fail(kerr.InvalidReplicationFactor, fmt.Sprintf("Replication factor %d is not supported yet: kmirror partitions have one replica (replication factor 1).", rf))
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
			} else if err != nil {
				fail(kerr.UnknownServerError, err.Error())
				break
			}
			st.TopicID = t.ID
			st.NumPartitions, st.ReplicationFactor = partitions, rf
			st.Configs = b.createTopicsConfigs(t)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *Broker) createTopicsConfigs(t *metadata.Topic) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, name := range config.Topic.Names() {
		v, src := b.topicConfig(t, name)
		out = append(out, kmsg.CreateTopicsResponseTopicConfig{Name: name, Value: strp(v), Source: src})
	}
	return out
}

func (b *Broker) handleDeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	for _, n := range req.TopicNames {
		targets = append(targets, target{name: strp(n)})
	}
	for _, t := range req.Topics {
		targets = append(targets, target{name: t.Topic, id: t.TopicID})
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		im := b.meta.Image()
		var t *metadata.Topic
		if tg.name != nil {
			t = im.Topics[*tg.name]
		} else {
			t = im.TopicsByID[tg.id]
		}
		switch {
		case t == nil && tg.name == nil:
			st.ErrorCode = kerr.UnknownTopicID.Code
		case t == nil:
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case isInternalTopic(t.Name):
			st.ErrorCode = kerr.TopicDeletionDisabled.Code
			st.ErrorMessage = strp("internal topics cannot be deleted")
		default:
			st.Topic, st.TopicID = strp(t.Name), t.ID
			if ok, msg := b.checkMirrorWrite(t.Name, -1, "delete topics"); !ok {
				st.ErrorCode = kerr.PolicyViolation.Code
				st.ErrorMessage = strp(msg)
				break
			}
			if _, err := b.meta.Apply(ctx, &metadata.RemoveTopicRecord{ID: t.ID}); err != nil {
				st.ErrorCode = kerr.UnknownServerError.Code
				st.ErrorMessage = strp(err.Error())
				break
			}
			b.applyNow()
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *Broker) handleCreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		fail := func(e *kerr.Error, msg string) { st.ErrorCode = e.Code; st.ErrorMessage = strp(msg) }
		t := b.meta.Image().Topics[rt.Topic]
		switch {
		case t == nil:
			fail(kerr.UnknownTopicOrPartition, "The topic '"+rt.Topic+"' does not exist.")
		case rt.Count < t.Partitions:
			fail(kerr.InvalidPartitions, fmt.Sprintf("The topic %s currently has %d partition(s); %d would not be an increase.", rt.Topic, t.Partitions, rt.Count))
		case rt.Count == t.Partitions:
			fail(kerr.InvalidPartitions, fmt.Sprintf("Topic already has %d partition(s).", t.Partitions))
		case len(rt.Assignment) > 0:
			fail(kerr.InvalidReplicaAssignment, "manual replica assignment is not supported by kmirror yet")
		default:
			if ok, msg := b.checkMirrorWrite(rt.Topic, -1, "create partitions"); !ok {
				fail(kerr.PolicyViolation, msg)
				break
			}
			if req.ValidateOnly {
				break
			}
			if err := b.CreatePartitions(ctx, rt.Topic, rt.Count); err != nil {
				fail(kerr.UnknownServerError, err.Error())
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
