package metadata

import (
	"errors"
	"reflect"
	"testing"
)

func i32p(v int32) *int32 { return &v }
func boolp(v bool) *bool  { return &v }

// TestPartitionRecords applies the partition records of a topic's life: creation with
// its assignment, growth, a leader change and a leader-epoch bump, and checks every
// refusal of an invalid one.
func TestPartitionRecords(t *testing.T) {
	c := open(t, t.TempDir(), "")
	defer c.Close()
	ep := []Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: "PLAINTEXT"}}
	apply(t, c, RegisterBrokerRecord{BrokerID: 1, Endpoints: ep}, RegisterBrokerRecord{BrokerID: 2, Endpoints: ep},
		RegisterBrokerRecord{BrokerID: 3, Endpoints: ep}, RegisterBrokerRecord{BrokerID: 4, Endpoints: ep, Fenced: true})
	id := NewTopicID()
	im := apply(t, c,
		TopicRecord{Name: "t", ID: id, Partitions: 2},
		PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
		PartitionRecord{TopicID: id, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 3},
	)
	tp := im.Topics["t"]
	if got := tp.Partition(0); !reflect.DeepEqual(got, &PartitionRegistration{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}) {
		t.Fatalf("partition 0: %+v", got)
	}
	if tp.Partition(2) != nil || tp.Partition(-1) != nil {
		t.Fatal("a partition outside the topic has a registration")
	}

	im = apply(t, c, PartitionCountRecord{Name: "t", Partitions: 3})
	if p := im.Topics["t"].Partition(2); p == nil || p.Assigned() || p.Leader != NoLeader {
		t.Fatalf("a partition added without a PartitionRecord: %+v", p)
	}
	apply(t, c, PartitionRecord{TopicID: id, Partition: 2, Replicas: []int32{3}, ISR: []int32{3}, Leader: 3})

	im = apply(t, c, PartitionChangeRecord{TopicID: id, Partition: 0, Leader: i32p(2), ISR: []int32{2}, LeaderEpoch: 1})
	if p := im.Topics["t"].Partition(0); p.Leader != 2 || p.LeaderEpoch != 1 || p.PartitionEpoch != 1 || !reflect.DeepEqual(p.ISR, []int32{2}) {
		t.Fatalf("after the leader change: %+v", p)
	}
	im = apply(t, c, PartitionChangeRecord{TopicID: id, Partition: 0, LeaderEpoch: 15}) // a bump
	if p := im.Topics["t"].Partition(0); p.Leader != 2 || p.LeaderEpoch != 15 || p.PartitionEpoch != 2 {
		t.Fatalf("after the bump: %+v", p)
	}
	im = apply(t, c, PartitionChangeRecord{TopicID: id, Partition: 2, Leader: i32p(NoLeader), LeaderEpoch: 1})
	if p := im.Topics["t"].Partition(2); p.Leader != NoLeader || p.LeaderEpoch != 1 {
		t.Fatalf("offline partition: %+v", p)
	}

	for _, tc := range []struct {
		name string
		rec  Record
	}{
		{"assigned twice", PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}},
		{"no replicas", TopicRecordWith(NewTopicID(), PartitionRecord{Partition: 0, ISR: []int32{1}, Leader: 1})},
		{"duplicate replicas", TopicRecordWith(NewTopicID(), PartitionRecord{Partition: 0, Replicas: []int32{1, 1}, ISR: []int32{1}, Leader: 1})},
		{"ISR outside the replicas", TopicRecordWith(NewTopicID(), PartitionRecord{Partition: 0, Replicas: []int32{1}, ISR: []int32{2}, Leader: 2})},
		{"leader outside the ISR", TopicRecordWith(NewTopicID(), PartitionRecord{Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 2})},
		{"index outside the topic", PartitionRecord{TopicID: id, Partition: 3, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}},
		{"new leader without a new epoch", PartitionChangeRecord{TopicID: id, Partition: 0, Leader: i32p(1), ISR: []int32{1}, LeaderEpoch: 15}},
		{"leader epoch going down", PartitionChangeRecord{TopicID: id, Partition: 0, LeaderEpoch: 14}},
		{"empty ISR", PartitionChangeRecord{TopicID: id, Partition: 1, ISR: []int32{}, Leader: i32p(NoLeader), LeaderEpoch: 4}},
	} {
		recs := []Record{tc.rec}
		if multi, ok := tc.rec.(multiRecord); ok {
			recs = multi
		}
		if _, err := c.Apply(t.Context(), recs...); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: %v, want ErrInvalidRecord", tc.name, err)
		}
	}
	for _, tc := range []struct {
		name string
		rec  Record
	}{
		{"replica on an unregistered broker", TopicRecordWith(NewTopicID(), PartitionRecord{Partition: 0, Replicas: []int32{1, 9}, ISR: []int32{1}, Leader: 1})},
		{"fenced leader", TopicRecordWith(NewTopicID(), PartitionRecord{Partition: 0, Replicas: []int32{4}, ISR: []int32{4}, Leader: 4})},
	} {
		if _, err := c.Apply(t.Context(), tc.rec.(multiRecord)...); !errors.Is(err, ErrStalePlacement) {
			t.Errorf("%s: %v, want ErrStalePlacement", tc.name, err)
		}
	}
	if _, err := c.Apply(t.Context(), PartitionChangeRecord{TopicID: NewTopicID(), Partition: 0}); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("change of an unknown topic: %v", err)
	}
	if !reflect.DeepEqual(cloneImage(t, c.Image()).Topics["t"], c.Image().Topics["t"]) {
		t.Fatal("partition registrations do not survive a snapshot")
	}
}

// multiRecord is a batch given to the table of TestPartitionRecords as one entry.
type multiRecord []Record

func (multiRecord) isRecord() {}

// TopicRecordWith is a one-partition topic with id and the partition record p for it.
func TopicRecordWith(id TopicID, p PartitionRecord) Record {
	p.TopicID = id
	return multiRecord{TopicRecord{Name: "x-" + TopicIDString(id), ID: id, Partitions: 1}, p}
}

// TestBrokerRecords registers, fences, unfences and unregisters brokers: the broker epoch
// is the registration's metadata offset, and changes with another epoch are refused.
func TestBrokerRecords(t *testing.T) {
	c := open(t, t.TempDir(), "")
	defer c.Close()
	ep := []Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: "PLAINTEXT"}}
	im := apply(t, c, RegisterBrokerRecord{BrokerID: 2, IncarnationID: NewTopicID(), Endpoints: ep, Rack: "r1", Fenced: true})
	b, ok := im.Broker(2)
	if !ok || b.Epoch != int64(im.Offset) || !b.Fenced || b.Usable() || b.Rack != "r1" {
		t.Fatalf("registered broker: %+v (image offset %d)", b, im.Offset)
	}
	if e, ok := b.Endpoint("PLAINTEXT"); !ok || e.Port != 9092 {
		t.Fatalf("endpoint: %+v %v", e, ok)
	}
	epoch := b.Epoch
	im = apply(t, c, BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: epoch, Fenced: boolp(false)})
	if b := im.Brokers[2]; b.Fenced || !b.Usable() || len(im.UsableBrokers()) != 1 {
		t.Fatalf("unfenced broker: %+v", b)
	}
	im = apply(t, c, BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: epoch, InControlledShutdown: boolp(true)})
	if b := im.Brokers[2]; b.Usable() {
		t.Fatalf("a broker in controlled shutdown is usable: %+v", b)
	}
	if _, err := c.Apply(t.Context(), BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: epoch + 1, Fenced: boolp(true)}); !errors.Is(err, ErrUnknownBroker) {
		t.Fatalf("change with a stale broker epoch: %v", err)
	}
	if _, err := c.Apply(t.Context(), RegisterBrokerRecord{BrokerID: 3}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("registration without endpoints: %v", err)
	}
	im = apply(t, c, RegisterBrokerRecord{BrokerID: 2, IncarnationID: NewTopicID(), Endpoints: ep, Fenced: true})
	if im.Brokers[2].Epoch == epoch {
		t.Fatal("a new registration kept the old broker epoch")
	}
	if !reflect.DeepEqual(cloneImage(t, im).Brokers, im.Brokers) {
		t.Fatal("broker registrations do not survive a snapshot")
	}
	im = apply(t, c, UnregisterBrokerRecord{BrokerID: 2, BrokerEpoch: im.Brokers[2].Epoch})
	if len(im.Brokers) != 0 {
		t.Fatalf("brokers after unregistering: %v", im.BrokerIDs())
	}
}

func TestProducerIDsRecord(t *testing.T) {
	c := open(t, t.TempDir(), "")
	defer c.Close()
	im := apply(t, c, ProducerIDsRecord{BrokerID: 1, NextProducerID: 1000})
	if im.NextProducerID != 1000 || cloneImage(t, im).NextProducerID != 1000 {
		t.Fatalf("next producer ID %d", im.NextProducerID)
	}
	if _, err := c.Apply(t.Context(), ProducerIDsRecord{BrokerID: 1, NextProducerID: 1000}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("a block that does not move forward: %v", err)
	}
}
