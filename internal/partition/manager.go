package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/storage"
)

// ErrUnknownTopicOrPartition: the partition is not in the metadata
// (UNKNOWN_TOPIC_OR_PARTITION).
var ErrUnknownTopicOrPartition = errors.New("UNKNOWN_TOPIC_OR_PARTITION")

// Change is what one applied image changed in the roles of this broker's partitions.
// Leaders became leader or got a new leader epoch as leader; Resigned stopped leading
// (became followers, went offline, or left this broker; Deleted also lists those whose
// topic is gone).
type Change struct {
	Leaders  []*Partition
	Resigned []*Partition
	// Followers became followers or follow a new leader or leader epoch: the replica
	// fetchers fetch them from their leader (Registration().Leader).
	Followers []*Partition
	// Unfollowed stopped following: they lead now, went offline or left this broker.
	Unfollowed []*Partition
}

// Options configure a ReplicaManager.
type Options struct {
	// NodeID is this broker's node.id.
	NodeID int32
	// Logs is the log directory.
	Logs *storage.Manager
	// Config returns the log settings of a topic (its configs over the broker's).
	Config func(t *metadata.Topic) storage.Config
	// MinInsyncReplicas returns a topic's min.insync.replicas (its config over the
	// broker's); nil: 1.
	MinInsyncReplicas func(t *metadata.Topic) int32
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms: a follower not caught up for this
	// long leaves the ISR. 0: Kafka's 30000.
	ReplicaLagTimeMaxMs int64
	// AlterPartition sends ISR changes to the active controller; nil keeps them local
	// (a broker without a controller channel).
	AlterPartition AlterPartitionFunc
	// BrokerEpoch returns this broker's current broker epoch (−1 before it registered).
	BrokerEpoch func() int64
	// OnChange is called after every applied image that changed a role, from the goroutine
	// that called Apply; it must not block (coordinators load asynchronously).
	OnChange func(Change)
	// Logger receives the manager's messages; nil discards them.
	Logger *slog.Logger
}

// ReplicaManager owns the partitions hosted on this broker and applies metadata images to
// them (Kafka's ReplicaManager.applyDelta: deleted topics first, then partitions this
// broker leads, then those it follows). Reads are lock-free; Apply calls are serialised.
// Safe for concurrent use.
type ReplicaManager struct {
	opts Options
	log  *slog.Logger

	applyMu    sync.Mutex
	holdOnLead HoldOnLeadFunc // SetHoldOnLead; guarded by applyMu
	state      atomic.Pointer[hosted]
	alter      *alterPartitionManager

	chMu    sync.Mutex
	changed chan struct{}
}

// hosted is one immutable view: the image last applied and the partitions hosted.
type hosted struct {
	im    *metadata.Image
	parts map[kafka.TopicPartition]*Partition
}

// HoldOnLeadFunc reports whether this broker, becoming the leader of partition
// partition of topic t in image im, must start with the partition's high watermark held
// (Partition.HoldHighWatermark) until the partition's owner decides: the mirror manager's,
// true for a partition whose log may hold records that must never become readable and
// whose runtime it will run (cluster.md §3). It is called with the partition's locks
// held: it must not block nor call into the partition.
type HoldOnLeadFunc func(im *metadata.Image, t *metadata.Topic, partition int32) bool

// SetHoldOnLead installs fn (nil removes it): from then on a partition this broker
// becomes leader of starts with its HW held when fn says so, and stays held until its
// owner calls HoldHighWatermark — or until fn, asked again after every applied image,
// says no more (the topic no longer one the owner runs: the hold never outlives the
// reason for it). The partitions this broker leads already take the hold as at become
// (and those fn no longer holds lose theirs): install it before any follower can fetch
// from them and before their owner decides (the broker does before it serves).
func (rm *ReplicaManager) SetHoldOnLead(fn HoldOnLeadFunc) {
	rm.applyMu.Lock()
	defer rm.applyMu.Unlock()
	rm.holdOnLead = fn
	h := rm.state.Load()
	for _, part := range h.parts {
		part.settleHoldOnLead(rm.holdFor(h.im, part), true)
	}
}

// holdFor is the HoldOnLead question for part in im (false without a HoldOnLead).
// applyMu held.
func (rm *ReplicaManager) holdFor(im *metadata.Image, part *Partition) func() bool {
	fn := rm.holdOnLead
	return func() bool {
		if fn == nil {
			return false
		}
		t := im.Topics[part.topic]
		return t != nil && t.ID == part.topicID && fn(im, t, part.index)
	}
}

// NewReplicaManager returns a manager with no partitions; Apply gives it some.
func NewReplicaManager(opts Options) *ReplicaManager {
	l := opts.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	if opts.ReplicaLagTimeMaxMs <= 0 {
		opts.ReplicaLagTimeMaxMs = defaultReplicaLagTimeMaxMs
	}
	rm := &ReplicaManager{opts: opts, log: l.With("component", "replica-manager")}
	rm.alter = newAlterPartitionManager(rm, opts.AlterPartition)
	rm.state.Store(&hosted{im: &metadata.Image{Topics: map[string]*metadata.Topic{}, TopicsByID: map[metadata.TopicID]*metadata.Topic{}},
		parts: map[kafka.TopicPartition]*Partition{}})
	return rm
}

// Image is the metadata image applied last.
func (rm *ReplicaManager) Image() *metadata.Image { return rm.state.Load().im }

// Get returns the hosted partition topic/p, nil when this broker hosts no replica of it.
func (rm *ReplicaManager) Get(topic string, p int32) *Partition {
	return rm.state.Load().parts[kafka.TopicPartition{Topic: topic, Partition: p}]
}

// Partitions returns every hosted partition, sorted by topic and index.
func (rm *ReplicaManager) Partitions() []*Partition {
	h := rm.state.Load()
	out := slices.Collect(maps.Values(h.parts))
	slices.SortFunc(out, func(a, b *Partition) int {
		if a.topic != b.topic {
			if a.topic < b.topic {
				return -1
			}
			return 1
		}
		return int(a.index - b.index)
	})
	return out
}

// Leader returns the hosted partition when this broker leads it. Errors:
// ErrUnknownTopicOrPartition (not in the metadata), ErrNotLeader (led elsewhere, offline,
// or not hosted here).
func (rm *ReplicaManager) Leader(topic string, p int32) (*Partition, error) {
	h := rm.state.Load()
	t := h.im.Topics[topic]
	if t == nil || t.Partition(p) == nil {
		return nil, ErrUnknownTopicOrPartition
	}
	part := h.parts[kafka.TopicPartition{Topic: topic, Partition: p}]
	if part == nil || !part.IsLeader() {
		return nil, ErrNotLeader
	}
	return part, nil
}

// AwaitLeader waits until this broker leads topic/p (an image applied after a topic was
// created or a leader elected), until ctx ends. Errors: ErrNotLeader when the applied
// image gives the partition another leader; ErrUnknownTopicOrPartition when ctx ends
// before the topic exists; ctx's error otherwise.
func (rm *ReplicaManager) AwaitLeader(ctx context.Context, topic string, p int32) (*Partition, error) {
	for {
		ch := rm.Changed()
		part, err := rm.Leader(topic, p)
		if err == nil {
			return part, nil
		}
		if errors.Is(err, ErrNotLeader) {
			if reg := rm.Image().Topics[topic].Partition(p); reg.Leader != rm.opts.NodeID && reg.Assigned() && reg.Leader != metadata.NoLeader {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-ch:
		}
	}
}

// Changed returns a channel closed after the next Apply.
func (rm *ReplicaManager) Changed() <-chan struct{} {
	rm.chMu.Lock()
	defer rm.chMu.Unlock()
	if rm.changed == nil {
		rm.changed = make(chan struct{})
	}
	return rm.changed
}

func (rm *ReplicaManager) notify() {
	rm.chMu.Lock()
	if rm.changed != nil {
		close(rm.changed)
		rm.changed = nil
	}
	rm.chMu.Unlock()
}

// Apply brings the hosted partitions to image im (newer than the last applied; an older
// or equal one is ignored): the logs of deleted topics, of recreated topics and of
// partitions no longer assigned here are closed and deleted; partitions assigned here
// are opened (recovered) and take the role of their registration; topic config changes
// reach their logs. A partition whose log cannot be opened (descriptors, disk,
// permissions) is logged with its cause and left out, and retried by the next Apply; it
// returns those failures joined.
func (rm *ReplicaManager) Apply(im *metadata.Image) error {
	rm.applyMu.Lock()
	defer rm.applyMu.Unlock()
	old := rm.state.Load()
	if im.Offset != 0 && im.Offset < old.im.Offset {
		return nil
	}
	parts := maps.Clone(old.parts)
	var ch Change
	var errs []error

	// 1. Deletes: topics gone or recreated (another topic ID), partitions moved away.
	for tp, part := range old.parts {
		t := im.Topics[tp.Topic]
		switch {
		case t == nil || t.ID != part.topicID:
			rm.log.Info("deleting the log of a deleted topic partition", "partition", part.String())
		case t.Partition(tp.Partition).Assigned() && !t.Partition(tp.Partition).HasReplica(rm.opts.NodeID):
			rm.log.Info("deleting the log of a partition no longer assigned to this broker", "partition", part.String())
		default:
			continue
		}
		wasLeader, wasFollower := part.IsLeader(), part.following()
		part.stop()
		if wasLeader {
			ch.Resigned = append(ch.Resigned, part)
		}
		if wasFollower {
			ch.Unfollowed = append(ch.Unfollowed, part)
		}
		delete(parts, tp)
		if err := rm.opts.Logs.Delete(tp.Topic, tp.Partition); err != nil {
			rm.log.Warn("deleting log", "partition", part.String(), "err", err)
		}
	}

	// 2. Partitions assigned here (or unassigned, from a release before clusters, whose
	// log this broker holds): open, then leaders, then followers.
	var leaders, followers []*Partition
	var regs = map[*Partition]*metadata.PartitionRegistration{}
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		ot := old.im.Topics[name]
		cfgChanged := ot == nil || ot.ID != t.ID || !maps.Equal(ot.Configs, t.Configs)
		var cfg *storage.Config
		config := func() storage.Config {
			if cfg == nil {
				c := rm.opts.Config(t)
				cfg = &c
			}
			return *cfg
		}
		for i, reg := range t.Registrations {
			p := int32(i)
			tp := kafka.TopicPartition{Topic: name, Partition: p}
			if reg.Assigned() && !reg.HasReplica(rm.opts.NodeID) {
				continue
			}
			part := parts[tp]
			if part == nil {
				if !reg.Assigned() && !rm.opts.Logs.Has(tp) {
					continue
				}
				l, err := rm.opts.Logs.Open(name, p, t.ID, config())
				if errors.Is(err, storage.ErrTopicIDMismatch) {
					// a directory left by an earlier topic of the same name (deleted while
					// this broker was down): a stray log, as Kafka's LogManager finds them
					rm.log.Info("deleting the log of an earlier topic with the same name", "partition", fmt.Sprintf("%s-%d", name, p), "err", err)
					if err = rm.opts.Logs.Delete(name, p); err == nil {
						l, err = rm.opts.Logs.Open(name, p, t.ID, config())
					}
				}
				if err != nil {
					rm.log.Error("cannot open the log of a partition assigned to this broker", "partition", fmt.Sprintf("%s-%d", name, p), "err", err)
					errs = append(errs, fmt.Errorf("opening %s-%d: %w", name, p, err))
					continue
				}
				part = newPartition(name, p, t.ID, rm.opts.NodeID, l, rm)
				parts[tp] = part
			} else if cfgChanged {
				part.log.SetConfig(config())
				part.setMinIsr(rm.minIsr(t))
			}
			if !reg.Assigned() {
				continue // no role until the controller assigns it
			}
			if part.reg.Load() == reg {
				continue
			}
			regs[part] = reg
			if reg.Leader == rm.opts.NodeID {
				leaders = append(leaders, part)
			} else {
				followers = append(followers, part)
			}
		}
	}
	for _, part := range leaders {
		wasFollower := part.following()
		if changed, err := part.become(regs[part], rm.minIsr(im.Topics[part.topic]), rm.holdFor(im, part)); err != nil {
			rm.log.Error("becoming leader", "partition", part.String(), "err", err)
			errs = append(errs, err)
		} else if changed {
			ch.Leaders = append(ch.Leaders, part)
			if wasFollower {
				ch.Unfollowed = append(ch.Unfollowed, part)
			}
		}
	}
	for _, part := range followers {
		wasLeader := part.IsLeader()
		changed, err := part.become(regs[part], rm.minIsr(im.Topics[part.topic]), nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if wasLeader {
			ch.Resigned = append(ch.Resigned, part)
		}
		switch {
		case regs[part].Leader != metadata.NoLeader && changed:
			ch.Followers = append(ch.Followers, part)
		case regs[part].Leader == metadata.NoLeader:
			ch.Unfollowed = append(ch.Unfollowed, part)
		}
	}
	// 3. Holds taken on becoming leader that no owner decided on yet go when HoldOnLead
	// says no more (the mirror deleted, the topic stopped or detached).
	for _, part := range parts {
		if part.hwOnLead.Load() {
			part.settleHoldOnLead(rm.holdFor(im, part), false)
		}
	}
	rm.state.Store(&hosted{im: im, parts: parts})
	rm.notify()
	if rm.opts.OnChange != nil && (len(ch.Leaders) > 0 || len(ch.Resigned) > 0 || len(ch.Followers) > 0 || len(ch.Unfollowed) > 0) {
		rm.opts.OnChange(ch)
	}
	return errors.Join(errs...)
}

// DeleteStray deletes the partition directories that im gives no replica on this broker
// (topics deleted while it was down, partitions assigned to other brokers), as Kafka's
// LogManager does with stray logs at start-up. Directories of unassigned partitions stay:
// they are this broker's until the controller assigns them.
func (rm *ReplicaManager) DeleteStray(im *metadata.Image, skip func(topic string) bool) error {
	existing, err := rm.opts.Logs.Existing()
	if err != nil {
		return err
	}
	for _, tp := range existing {
		if skip(tp.Topic) {
			continue
		}
		t := im.Topics[tp.Topic]
		reg := (*metadata.PartitionRegistration)(nil)
		if t != nil {
			reg = t.Partition(tp.Partition)
		}
		if reg != nil && (!reg.Assigned() || reg.HasReplica(rm.opts.NodeID)) {
			continue
		}
		rm.log.Info("deleting a stray log: the metadata gives this broker no replica of it", "topic", tp.Topic, "partition", tp.Partition)
		if err := rm.opts.Logs.Delete(tp.Topic, tp.Partition); err != nil {
			rm.log.Warn("deleting log", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		}
	}
	return nil
}

// Stop resigns every partition's role (shutdown); the logs stay open for the log manager
// to close.
func (rm *ReplicaManager) Stop() {
	rm.applyMu.Lock()
	defer rm.applyMu.Unlock()
	for _, p := range rm.state.Load().parts {
		p.stop()
	}
	rm.notify()
}

// defaultReplicaLagTimeMaxMs is Kafka's replica.lag.time.max.ms default.
const defaultReplicaLagTimeMaxMs = 30000

// Run does the replica manager's background work until ctx ends: the ISR changes go to
// the controller, and every replica.lag.time.max.ms / 2 each led partition drops the
// followers that have not caught up for replica.lag.time.max.ms (Kafka's
// isr-expiration task).
func (rm *ReplicaManager) Run(ctx context.Context) {
	go rm.alter.run(ctx)
	t := time.NewTicker(time.Duration(rm.opts.ReplicaLagTimeMaxMs/2) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := time.Now().UnixMilli()
			for _, p := range rm.state.Load().parts {
				if p.IsLeader() {
					p.maybeShrinkIsr(now, rm.opts.ReplicaLagTimeMaxMs)
				}
			}
		}
	}
}

// minIsr is t's min.insync.replicas.
func (rm *ReplicaManager) minIsr(t *metadata.Topic) int32 {
	if rm.opts.MinInsyncReplicas == nil || t == nil {
		return 1
	}
	return rm.opts.MinInsyncReplicas(t)
}

// brokerEpoch is this broker's broker epoch, −1 when unknown.
func (rm *ReplicaManager) brokerEpoch() int64 {
	if rm.opts.BrokerEpoch == nil {
		return -1
	}
	return rm.opts.BrokerEpoch()
}

// isrEligible reports whether broker id may join an ISR (Kafka's isReplicaIsrEligible):
// registered, unfenced, not in controlled shutdown, and — when the follower sent its
// broker epoch — registered with that epoch.
func (rm *ReplicaManager) isrEligible(id int32, brokerEpoch int64) bool {
	br, ok := rm.Image().Broker(id)
	if !ok || br.Fenced || br.InControlledShutdown {
		return false
	}
	return brokerEpoch < 0 || br.Epoch == brokerEpoch
}
