package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/internal/metadata"
)

// ErrInvalidReplicationFactor is returned by Place when the replicas cannot be placed
// (Kafka's InvalidReplicationFactorException, INVALID_REPLICATION_FACTOR); the message
// says why, in Kafka's words.
type ErrInvalidReplicationFactor struct{ Msg string }

func (e *ErrInvalidReplicationFactor) Error() string { return e.Msg }

// Place assigns replicas to partitions as Apache Kafka's StripedReplicaPlacer does:
// partitions stripe over the racks (brokers without broker.rack form one rack) and over
// the brokers of each rack, starting at a random offset, or, when the topic already has
// partitions (existing, CreatePartitions), right after the last one's leader; unfenced
// brokers are chosen before fenced ones and every leader (the first replica) is unfenced.
// Brokers in controlled shutdown take no new replicas. It returns numPartitions replica
// lists of replicationFactor broker IDs each, or *ErrInvalidReplicationFactor.
func Place(im *metadata.Image, numPartitions int32, replicationFactor int16, existing []*metadata.PartitionRegistration, rnd *rand.Rand) ([][]int32, error) {
	rl := newRackList(im, existing, rnd)
	switch {
	case replicationFactor <= 0:
		return nil, &ErrInvalidReplicationFactor{fmt.Sprintf("Invalid replication factor %d: the replication factor must be positive.", replicationFactor)}
	case rl.unfenced == 0:
		return nil, &ErrInvalidReplicationFactor{"All brokers are currently fenced."}
	case int(replicationFactor) > rl.total:
		return nil, &ErrInvalidReplicationFactor{fmt.Sprintf("The target replication factor of %d cannot be reached because only %d broker(s) are registered.", replicationFactor, rl.total)}
	}
	out := make([][]int32, numPartitions)
	for p := range out {
		out[p] = rl.place(int(replicationFactor))
	}
	return out, nil
}

// brokerList is the round-robin list of one rack's fenced or unfenced brokers
// (StripedReplicaPlacer.BrokerList).
type brokerList struct {
	ids                  []int32
	index, offset, epoch int
}

func (l *brokerList) init(rnd *rand.Rand, previous int) {
	if len(l.ids) == 0 {
		return
	}
	slices.Sort(l.ids)
	if previous >= 0 {
		l.offset = (previous + 1) % len(l.ids)
	} else {
		l.offset = rnd.IntN(len(l.ids))
	}
}

// next returns the next broker of this iteration epoch, −1 when every one was returned.
func (l *brokerList) next(epoch int) int32 {
	if len(l.ids) == 0 {
		return -1
	}
	if l.epoch != epoch {
		l.epoch, l.index = epoch, 0
		l.offset = (l.offset + 1) % len(l.ids)
	}
	if l.index >= len(l.ids) {
		return -1
	}
	id := l.ids[(l.index+l.offset)%len(l.ids)]
	l.index++
	return id
}

type rack struct{ fenced, unfenced brokerList }

// next prefers unfenced brokers, then fenced ones.
func (r *rack) next(epoch int) int32 {
	if id := r.unfenced.next(epoch); id >= 0 {
		return id
	}
	return r.fenced.next(epoch)
}

// rackList is StripedReplicaPlacer.RackList: racks in name order (racks with an unfenced
// broker first), a rotating start rack, and an iteration epoch that reshuffles once as
// many partitions as unfenced brokers were placed.
type rackList struct {
	rnd             *rand.Rand
	racks           map[string]*rack
	names           []string
	total, unfenced int
	epoch, offset   int
}

func newRackList(im *metadata.Image, existing []*metadata.PartitionRegistration, rnd *rand.Rand) *rackList {
	rl := &rackList{rnd: rnd, racks: map[string]*rack{}}
	rackOf := map[int32]string{}
	for _, id := range im.BrokerIDs() {
		b := im.Brokers[id]
		if b.InControlledShutdown {
			continue
		}
		rackOf[id] = b.Rack
		r := rl.racks[b.Rack]
		if r == nil {
			r = &rack{}
			rl.racks[b.Rack] = r
			rl.names = append(rl.names, b.Rack)
		}
		if b.Fenced {
			r.fenced.ids = append(r.fenced.ids, id)
		} else {
			r.unfenced.ids = append(r.unfenced.ids, id)
			rl.unfenced++
		}
		rl.total++
	}
	for name, r := range rl.racks {
		r.fenced.init(rnd, -1)
		r.unfenced.init(rnd, previousBrokerOffset(existing, rackOf, name, r.unfenced.ids))
	}
	// Racks with an unfenced broker first, each group sorted by name (Kafka sorts the
	// rack names; its fenced-only racks can never take the first replica anyway).
	slices.SortFunc(rl.names, func(a, b string) int {
		ua, ub := len(rl.racks[a].unfenced.ids) > 0, len(rl.racks[b].unfenced.ids) > 0
		if ua != ub {
			if ua {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	rl.offset = -1
	if n := len(existing); n > 0 && len(existing[n-1].Replicas) > 0 {
		if lr, ok := rackOf[existing[n-1].Replicas[0]]; ok {
			rl.offset = (slices.Index(rl.names, lr) + 1) % len(rl.names)
		}
	}
	if rl.offset < 0 {
		rl.offset = 0
		if len(rl.names) > 0 {
			rl.offset = rnd.IntN(len(rl.names))
		}
	}
	return rl
}

// previousBrokerOffset is the index, among a rack's unfenced brokers, of the last
// replica the topic's existing partitions put in that rack; −1 when none.
func previousBrokerOffset(existing []*metadata.PartitionRegistration, rackOf map[int32]string, name string, unfenced []int32) int {
	sorted := slices.Sorted(slices.Values(unfenced))
	for i := len(existing) - 1; i >= 0; i-- {
		for _, id := range existing[i].Replicas {
			if r, ok := rackOf[id]; ok && r == name {
				return slices.Index(sorted, id)
			}
		}
	}
	return -1
}

// place returns the replicas of the next partition: the leader from the first rack
// (from the rotating offset) with an unfenced broker left, the others from the following
// racks in turn.
func (rl *rackList) place(rf int) []int32 {
	if rl.epoch == rl.unfenced && rl.unfenced > 1 {
		rl.shuffle()
		rl.epoch = 0
	}
	if rl.offset == len(rl.names) {
		rl.offset = 0
	}
	out := make([]int32, 0, rf)
	first := rl.offset
	for {
		if id := rl.racks[rl.names[first]].unfenced.next(rl.epoch); id >= 0 {
			out = append(out, id)
			break
		}
		first = (first + 1) % len(rl.names)
	}
	ri := rl.offset
	for len(out) < rf {
		id := int32(-1)
		for id < 0 {
			if ri == first {
				first = -1 // the leader's rack gives its turn once
			} else {
				id = rl.racks[rl.names[ri]].next(rl.epoch)
			}
			ri = (ri + 1) % len(rl.names)
		}
		out = append(out, id)
	}
	rl.epoch++
	rl.offset++
	return out
}

func (rl *rackList) shuffle() {
	rl.rnd.Shuffle(len(rl.names), func(i, j int) { rl.names[i], rl.names[j] = rl.names[j], rl.names[i] })
	for _, r := range rl.racks {
		for _, l := range []*brokerList{&r.fenced, &r.unfenced} {
			rl.rnd.Shuffle(len(l.ids), func(i, j int) { l.ids[i], l.ids[j] = l.ids[j], l.ids[i] })
		}
	}
}

// PartitionRecords returns the PartitionRecords of new partitions of topic id, numbered
// from first, with the replicas assign gives them (Place), as Kafka's controller creates
// them: the ISR is the replicas that may lead in im (unfenced, not in controlled
// shutdown), in replica order, and the first of them leads; a fenced replica joins the
// ISR later, through its leader's AlterPartition. A partition none of whose replicas may
// lead is *ErrInvalidReplicationFactor, in Kafka's words.
func PartitionRecords(im *metadata.Image, id metadata.TopicID, first int32, assign [][]int32) ([]metadata.Record, error) {
	out := make([]metadata.Record, 0, len(assign))
	for i, replicas := range assign {
		var isr []int32
		for _, r := range replicas {
			if canLead(im, r) {
				isr = append(isr, r)
			}
		}
		if len(isr) == 0 {
			return nil, &ErrInvalidReplicationFactor{fmt.Sprintf("Unable to replicate the partition %d time(s): All brokers are currently fenced or in controlled shutdown.", len(replicas))}
		}
		out = append(out, metadata.PartitionRecord{TopicID: id, Partition: first + int32(i), Replicas: slices.Clone(replicas), ISR: isr, Leader: isr[0]})
	}
	return out, nil
}
