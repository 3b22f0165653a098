package broker

// Topics: names, the internal topics, and topics and partitions created with their
// placement over the registered brokers (CreateTopics, CreatePartitions, Metadata's
// auto-creation, the internal topics and the mirror manager's mirror.Local).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"

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

// createTopic writes the topic record with the partitions' placement (striped over the
// registered brokers) and opens the logs of the partitions placed here. A placement
// computed from an image older than the brokers' state is computed again. Errors: those
// of metadata Apply, *controller.ErrInvalidReplicationFactor, *storage.ErrFileLimit
// (the partitions placed here would exceed RLIMIT_NOFILE: nothing is written) and
// errPartitionsNotOpened (a log placed here could not be opened: the topic is removed
// again).
func (b *Broker) createTopic(ctx context.Context, name string, id metadata.TopicID, partitions int32, rf int16, configs map[string]string, mirror *metadata.MirrorTopic) (*metadata.Topic, error) {
	if configs == nil {
		configs = map[string]string{}
	}
	for attempt := 0; ; attempt++ {
		im := b.meta.Image()
		assign, err := controller.Place(im, partitions, rf, nil, newRand())
		if err != nil {
			return nil, err
		}
		if err := b.checkFileBudget(name, assign); err != nil {
			return nil, err
		}
		parts, err := controller.PartitionRecords(im, id, 0, assign)
		if err != nil {
			return nil, err
		}
		recs := append([]metadata.Record{&metadata.TopicRecord{Name: name, ID: id, Partitions: partitions, Configs: configs, Mirror: mirror}}, parts...)
		im, err = b.meta.Apply(ctx, recs...)
		if errors.Is(err, metadata.ErrStalePlacement) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, err
		}
		t := im.Topics[name]
		if err := b.rm.Apply(im); err != nil && b.missingLocal(t) {
			return nil, b.undoCreateTopic(t, err)
		}
		return t, nil
	}
}

// missingLocal reports whether a partition of t placed on this broker has no open log
// (the replica manager could not open it).
func (b *Broker) missingLocal(t *metadata.Topic) bool {
	for i, reg := range t.Registrations {
		if reg.HasReplica(b.nodeID) && b.rm.Get(t.Name, int32(i)) == nil {
			return true
		}
	}
	return false
}

// undoCreateTopic removes a topic just created whose partitions on this broker could not
// be opened (the replica manager logged each at ERROR with its cause), so that no
// half-created topic stays behind; the logs it did open are deleted with it. It returns
// errPartitionsNotOpened wrapping cause.
func (b *Broker) undoCreateTopic(t *metadata.Topic, cause error) error {
	b.logger.Error("undoing the creation of a topic whose partitions could not be opened", "topic", t.Name, "err", cause)
	if _, err := b.meta.Apply(b.ctx, &metadata.RemoveTopicRecord{ID: t.ID}); err != nil {
		b.logger.Error("removing the half-created topic", "topic", t.Name, "err", err)
	} else {
		b.applyNow()
	}
	return fmt.Errorf("%w: topic %s: %w", errPartitionsNotOpened, t.Name, cause)
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
// new partitions after the existing ones. *storage.ErrFileLimit: the partitions placed
// here would exceed RLIMIT_NOFILE, nothing is written.
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
		if err := b.checkFileBudget(name, assign); err != nil {
			return err
		}
		parts, err := controller.PartitionRecords(im, t.ID, t.Partitions, assign)
		if err != nil {
			return err
		}
		recs := append([]metadata.Record{&metadata.PartitionCountRecord{Name: name, Partitions: count}}, parts...)
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
