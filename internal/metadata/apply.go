package metadata

import (
	"fmt"
	"maps"
	"strconv"
)

// applyBatch applies recs, in order, to a copy-on-write successor of im and returns it with
// Offset set to offset. im is never modified. On the first invalid record it returns the
// error and no image: a batch applies entirely or not at all.
func applyBatch(im *Image, offset uint64, recs []Record) (*Image, error) {
	b := &builder{next: new(Image)}
	*b.next = *im
	b.next.Offset = offset
	for _, r := range recs {
		if err := b.apply(r); err != nil {
			return nil, err
		}
	}
	return b.next, nil
}

// builder tracks which maps of next are already private copies, so that each map of the
// previous image is cloned at most once per batch.
type builder struct {
	next                                  *Image
	topicsOwned, mirrorsOwned, nodesOwned bool
}

func (b *builder) ownTopics() {
	if !b.topicsOwned {
		b.next.Topics = maps.Clone(b.next.Topics)
		b.next.TopicsByID = maps.Clone(b.next.TopicsByID)
		b.topicsOwned = true
	}
}

func (b *builder) ownMirrors() {
	if !b.mirrorsOwned {
		b.next.Mirrors = maps.Clone(b.next.Mirrors)
		b.mirrorsOwned = true
	}
}

// putTopic stores t (a fresh value) under its name and ID.
func (b *builder) putTopic(t *Topic) {
	b.ownTopics()
	b.next.Topics[t.Name] = t
	b.next.TopicsByID[t.ID] = t
}

// setConfig returns a copy of m with name set to value, or deleted when value is nil; nil
// when the result is empty.
func setConfig(m map[string]string, name string, value *string) map[string]string {
	m = maps.Clone(m)
	if value == nil {
		delete(m, name)
	} else {
		if m == nil {
			m = map[string]string{}
		}
		m[name] = *value
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func (b *builder) checkMirrorTopic(mt *MirrorTopic, topic string) error {
	if mt == nil {
		return nil
	}
	if !mt.Desired.valid() {
		return fmt.Errorf("%w: topic %q: desired mirror state %v", ErrInvalidRecord, topic, mt.Desired)
	}
	if _, ok := b.next.Mirrors[mt.MirrorName]; !ok {
		return fmt.Errorf("%w: %q (topic %q)", ErrUnknownMirror, mt.MirrorName, topic)
	}
	return nil
}

func (b *builder) apply(r Record) error {
	im := b.next
	switch r := r.(type) {
	case ClusterRecord:
		if r.ClusterID == "" {
			return fmt.Errorf("%w: empty cluster ID", ErrInvalidRecord)
		}
		if im.ClusterID != "" {
			return fmt.Errorf("%w: cluster ID already set to %s", ErrInvalidRecord, im.ClusterID)
		}
		im.ClusterID = r.ClusterID

	case TopicRecord:
		if r.Name == "" || r.ID == (TopicID{}) {
			return fmt.Errorf("%w: topic needs a name and a non-zero topic ID", ErrInvalidRecord)
		}
		if _, ok := im.Topics[r.Name]; ok {
			return fmt.Errorf("%w: topic %q", ErrTopicExists, r.Name)
		}
		if t, ok := im.TopicsByID[r.ID]; ok {
			return fmt.Errorf("%w: topic ID %s is used by topic %q", ErrTopicExists, TopicIDString(r.ID), t.Name)
		}
		if r.Partitions < 1 {
			return fmt.Errorf("%w: topic %q: %d partitions", ErrInvalidPartitions, r.Name, r.Partitions)
		}
		if err := b.checkMirrorTopic(r.Mirror, r.Name); err != nil {
			return err
		}
		t := &Topic{Name: r.Name, ID: r.ID, Partitions: r.Partitions}
		if len(r.Configs) > 0 {
			t.Configs = maps.Clone(r.Configs)
		}
		if r.Mirror != nil {
			mt := *r.Mirror
			t.Mirror = &mt
		}
		b.putTopic(t)

	case PartitionCountRecord:
		old, ok := im.Topics[r.Name]
		if !ok {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, r.Name)
		}
		if r.Partitions <= old.Partitions {
			return fmt.Errorf("%w: topic %q has %d partitions, cannot change to %d", ErrInvalidPartitions, r.Name, old.Partitions, r.Partitions)
		}
		t := *old
		t.Partitions = r.Partitions
		b.putTopic(&t)

	case RemoveTopicRecord:
		old, ok := im.TopicsByID[r.ID]
		if !ok {
			return fmt.Errorf("%w: topic ID %s", ErrUnknownTopic, TopicIDString(r.ID))
		}
		b.ownTopics()
		delete(im.Topics, old.Name)
		delete(im.TopicsByID, old.ID)

	case ConfigRecord:
		if r.Name == "" {
			return fmt.Errorf("%w: empty config name", ErrInvalidRecord)
		}
		switch r.ResourceType {
		case ResourceTopic:
			old, ok := im.Topics[r.ResourceName]
			if !ok {
				return fmt.Errorf("%w: %q", ErrUnknownTopic, r.ResourceName)
			}
			t := *old
			t.Configs = setConfig(old.Configs, r.Name, r.Value)
			b.putTopic(&t)
		case ResourceBroker:
			if r.ResourceName == "" {
				im.BrokerConfigs = setConfig(im.BrokerConfigs, r.Name, r.Value)
				if im.BrokerConfigs == nil {
					im.BrokerConfigs = map[string]string{}
				}
				break
			}
			if _, err := strconv.ParseInt(r.ResourceName, 10, 32); err != nil {
				return fmt.Errorf("%w: broker config resource %q is not a broker ID", ErrInvalidRecord, r.ResourceName)
			}
			if !b.nodesOwned {
				im.NodeConfigs = maps.Clone(im.NodeConfigs)
				b.nodesOwned = true
			}
			if m := setConfig(im.NodeConfigs[r.ResourceName], r.Name, r.Value); m != nil {
				im.NodeConfigs[r.ResourceName] = m
			} else {
				delete(im.NodeConfigs, r.ResourceName)
			}
		case ResourceClusterMirror:
			old, ok := im.Mirrors[r.ResourceName]
			if !ok {
				return fmt.Errorf("%w: %q", ErrUnknownMirror, r.ResourceName)
			}
			m := *old
			m.Configs = setConfig(old.Configs, r.Name, r.Value)
			b.ownMirrors()
			im.Mirrors[m.Name] = &m
		default:
			return fmt.Errorf("%w: config resource type %d", ErrInvalidRecord, r.ResourceType)
		}

	case MirrorRecord:
		if r.Name == "" {
			return fmt.Errorf("%w: empty mirror name", ErrInvalidRecord)
		}
		if _, ok := im.Mirrors[r.Name]; ok {
			return fmt.Errorf("%w: %q", ErrMirrorExists, r.Name)
		}
		m := &Mirror{Name: r.Name, SourceClusterID: r.SourceClusterID, CreatedMs: r.CreatedMs}
		if len(r.Configs) > 0 {
			m.Configs = maps.Clone(r.Configs)
		}
		b.ownMirrors()
		im.Mirrors[r.Name] = m

	case RemoveMirrorRecord:
		if _, ok := im.Mirrors[r.Name]; !ok {
			return fmt.Errorf("%w: %q", ErrUnknownMirror, r.Name)
		}
		b.ownMirrors()
		delete(im.Mirrors, r.Name)
		for _, old := range im.MirrorTopics(r.Name) {
			t := *old
			t.Mirror = nil
			b.putTopic(&t)
		}

	case MirrorTopicRecord:
		old, ok := im.Topics[r.Topic]
		if !ok {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, r.Topic)
		}
		if err := b.checkMirrorTopic(r.Mirror, r.Topic); err != nil {
			return err
		}
		t := *old
		t.Mirror = nil
		if r.Mirror != nil {
			mt := *r.Mirror
			t.Mirror = &mt
		}
		b.putTopic(&t)

	default:
		return fmt.Errorf("%w: unknown record type %T", ErrInvalidRecord, r)
	}
	return nil
}
