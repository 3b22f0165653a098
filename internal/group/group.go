package group

import (
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka error codes returned by the coordinator.
var (
	errUnknownTopicOrPartition   = kerr.UnknownTopicOrPartition.Code
	errCoordinatorLoadInProgress = kerr.CoordinatorLoadInProgress.Code
	errCoordinatorNotAvailable   = kerr.CoordinatorNotAvailable.Code
	errNotCoordinator            = kerr.NotCoordinator.Code
	errIllegalGeneration         = kerr.IllegalGeneration.Code
	errInconsistentGroupProtocol = kerr.InconsistentGroupProtocol.Code
	errInvalidGroupID            = kerr.InvalidGroupID.Code
	errUnknownMemberID           = kerr.UnknownMemberID.Code
	errInvalidSessionTimeout     = kerr.InvalidSessionTimeout.Code
	errRebalanceInProgress       = kerr.RebalanceInProgress.Code
	errOffsetMetadataTooLarge    = kerr.OffsetMetadataTooLarge.Code
	errNonEmptyGroup             = kerr.NonEmptyGroup.Code
	errGroupIDNotFound           = kerr.GroupIDNotFound.Code
	errMemberIDRequired          = kerr.MemberIDRequired.Code
	errFencedInstanceID          = kerr.FencedInstanceID.Code
	errGroupMaxSizeReached       = kerr.GroupMaxSizeReached.Code
	errGroupSubscribedToTopic    = kerr.GroupSubscribedToTopic.Code
	errUnsupportedVersion        = kerr.UnsupportedVersion.Code
	errUnstableOffsetCommit      = kerr.UnstableOffsetCommit.Code
)

// State is a classic group's state, with Kafka's names (ClassicGroupState).
type State int8

// Classic group states.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

// String is Kafka's name of the state, as DescribeGroups and ListGroups report it.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	default:
		return "Dead"
	}
}

type protocol struct {
	name     string
	metadata []byte
}

// offsetEntry is a committed (or pending transactional) offset; expireMs is the v1
// ExpireTimestamp (-1 when none); batchOffset is the base offset of the
// __consumer_offsets batch that holds it (Kafka's CommitRecordMetadataAndOffset
// .appendedBatchOffset), which orders a transaction's offsets against later commits.
type offsetEntry struct {
	Offset
	expireMs    int64
	batchOffset int64
}

type joinResult struct {
	err          int16
	memberID     string
	generation   int32
	protocolType *string
	protocol     *string
	leader       string
	skip         bool
	members      []kmsg.JoinGroupResponseMember
}

type syncResult struct {
	err        int16
	assignment []byte
}

// member is MemberMetadata.
type member struct {
	id                 string
	instanceID         *string
	clientID           string
	clientHost         string
	rebalanceTimeoutMs int32
	sessionTimeoutMs   int32
	protocolType       string
	protocols          []protocol
	assignment         []byte

	joinCh          chan joinResult // non-nil while awaiting join
	syncCh          chan syncResult // non-nil while awaiting sync
	isNew           bool
	leaving         bool
	hbTimer         *time.Timer
	hbSeq           uint64
	latestHeartbeat int64
}

func (m *member) awaitingJoin() bool { return m.joinCh != nil }
func (m *member) awaitingSync() bool { return m.syncCh != nil }

func (m *member) stopTimer() {
	m.hbSeq++
	if m.hbTimer != nil {
		m.hbTimer.Stop()
		m.hbTimer = nil
	}
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// matches is MemberMetadata.matches: same protocols with the same metadata, in order.
func (m *member) matches(ps []protocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].name != m.protocols[i].name || string(ps[i].metadata) != string(m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

// group is ClassicGroup / GroupMetadata. Every field is guarded by mu.
type group struct {
	mu        sync.Mutex
	id        string
	partition int32

	state        State
	stateTs      int64 // currentStateTimestamp, ms; -1 when unknown
	protocolType *string
	protocol     *string
	generation   int32
	leader       string

	members        map[string]*member
	order          []string // member IDs in join order (leader re-election picks the first)
	static         map[string]string
	pending        map[string]*time.Timer
	pendingSync    map[string]bool
	numAwaiting    int
	newMemberAdded bool

	joinTimer    *time.Timer
	joinSeq      uint64
	initialDelay bool
	syncTimer    *time.Timer
	syncSeq      uint64

	offsets map[kafka.TopicPartition]offsetEntry
	// pendingTxn holds the offsets of TxnOffsetCommits by producer ID until that
	// producer's COMMIT or ABORT marker lands in the group's partition (Kafka's
	// GroupMetadata.pendingTransactionalOffsetCommits).
	pendingTxn map[int64]map[kafka.TopicPartition]offsetEntry
	// subscribed is the union of the consumer members' subscribed topics, computed at
	// each generation for protocol type "consumer"; nil when unknown.
	subscribed map[string]bool
}

func newGroup(id string, partition int32, now int64) *group {
	return &group{
		id:          id,
		partition:   partition,
		state:       Empty,
		stateTs:     now,
		members:     make(map[string]*member),
		static:      make(map[string]string),
		pending:     make(map[string]*time.Timer),
		pendingSync: make(map[string]bool),
		offsets:     make(map[kafka.TopicPartition]offsetEntry),
		pendingTxn:  make(map[int64]map[kafka.TopicPartition]offsetEntry),
	}
}

// hasPendingTxn reports whether a transaction holds a pending offset of t
// (GroupMetadata.hasPendingOffsetCommitsForTopicPartition).
func (g *group) hasPendingTxn(t kafka.TopicPartition) bool {
	for _, offs := range g.pendingTxn {
		if _, ok := offs[t]; ok {
			return true
		}
	}
	return false
}

// deleteOffset applies an offset tombstone of t: the committed offset and the pending
// transactional offsets of t go (Kafka 4's OffsetMetadataManager.replay, which loading
// follows too).
func (g *group) deleteOffset(t kafka.TopicPartition) {
	delete(g.offsets, t)
	for pid, offs := range g.pendingTxn {
		delete(offs, t)
		if len(offs) == 0 {
			delete(g.pendingTxn, pid)
		}
	}
}

// completePendingTxn is GroupMetadata.completePendingTxnOffsetCommit: on commit the
// producer's pending offsets become the committed ones, unless a commit appended after
// them is already there; on abort they are dropped.
func (g *group) completePendingTxn(pid int64, commit bool) {
	offs := g.pendingTxn[pid]
	delete(g.pendingTxn, pid)
	if !commit {
		return
	}
	for t, e := range offs {
		if cur, ok := g.offsets[t]; !ok || cur.batchOffset < e.batchOffset {
			g.offsets[t] = e
		}
	}
}

func (g *group) transition(s State) {
	g.state = s
	g.stateTs = nowMs()
}

func (g *group) is(s State) bool { return g.state == s }

func (g *group) has(memberID string) bool { _, ok := g.members[memberID]; return ok }

func (g *group) isLeader(memberID string) bool { return g.leader != "" && g.leader == memberID }

func (g *group) protocolTypeIs(t string) bool { return g.protocolType != nil && *g.protocolType == t }

func (g *group) canRebalance() bool {
	return g.state == Stable || g.state == CompletingRebalance || g.state == Empty
}

// isStaticMemberFenced: a known group.instance.id presented with another member ID.
func (g *group) isStaticMemberFenced(memberID string, instanceID *string) bool {
	if instanceID == nil {
		return false
	}
	cur, ok := g.static[*instanceID]
	return ok && cur != memberID
}

func (g *group) hasStatic(instanceID *string) bool {
	if instanceID == nil {
		return false
	}
	_, ok := g.static[*instanceID]
	return ok
}

// supportsProtocols is ClassicGroup.supportsProtocols.
func (g *group) supportsProtocols(ptype string, ps []protocol) bool {
	if g.is(Empty) {
		return ptype != "" && len(ps) > 0
	}
	if !g.protocolTypeIs(ptype) {
		return false
	}
	for _, p := range ps {
		if g.countSupporting(p.name) == len(g.members) {
			return true
		}
	}
	return false
}

func (g *group) countSupporting(name string) int {
	n := 0
	for _, m := range g.members {
		for _, p := range m.protocols {
			if p.name == name {
				n++
				break
			}
		}
	}
	return n
}

// selectProtocol is ClassicGroup.selectProtocol: among the protocols every member
// supports, each member votes for its most preferred; the most voted wins (ties: the
// candidate the earliest-joined member prefers).
func (g *group) selectProtocol() string {
	var candidates []string
	if len(g.order) > 0 {
		// Every member supports a candidate, so the first member's list holds them all.
		for _, p := range g.members[g.order[0]].protocols {
			if g.countSupporting(p.name) == len(g.members) && !contains(candidates, p.name) {
				candidates = append(candidates, p.name)
			}
		}
	}
	votes := make(map[string]int)
	for _, id := range g.order {
		for _, p := range g.members[id].protocols {
			if contains(candidates, p.name) {
				votes[p.name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for _, cand := range candidates {
		if votes[cand] > bestVotes {
			best, bestVotes = cand, votes[cand]
		}
	}
	return best
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (g *group) rebalanceTimeout() time.Duration {
	var max int32
	for _, m := range g.members {
		if m.rebalanceTimeoutMs > max {
			max = m.rebalanceTimeoutMs
		}
	}
	return time.Duration(max) * time.Millisecond
}

func (g *group) hasAllMembersJoined() bool {
	return len(g.members) == g.numAwaiting && len(g.pending) == 0
}

func (g *group) add(m *member, ch chan joinResult) {
	if len(g.members) == 0 {
		pt := m.protocolType
		g.protocolType = &pt
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	m.joinCh = ch
	if ch != nil {
		g.numAwaiting++
	}
	if t, ok := g.pending[m.id]; ok {
		t.Stop()
		delete(g.pending, m.id)
	}
}

func (g *group) remove(id string) {
	m, ok := g.members[id]
	if !ok {
		return
	}
	m.stopTimer()
	delete(g.members, id)
	for i, x := range g.order {
		if x == id {
			g.order = append(g.order[:i:i], g.order[i+1:]...)
			break
		}
	}
	if m.awaitingJoin() {
		g.numAwaiting--
	}
	if m.instanceID != nil && g.static[*m.instanceID] == id {
		delete(g.static, *m.instanceID)
	}
	if g.isLeader(id) {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	if t, ok := g.pending[id]; ok {
		t.Stop()
		delete(g.pending, id)
	}
	delete(g.pendingSync, id)
}

// updateMember is ClassicGroup.updateMember: new protocols and timeouts, and the member's
// JoinGroup response channel.
func (g *group) updateMember(m *member, ps []protocol, rebalanceMs, sessionMs int32, ch chan joinResult) {
	m.protocols = ps
	m.rebalanceTimeoutMs = rebalanceMs
	m.sessionTimeoutMs = sessionMs
	if ch != nil && !m.awaitingJoin() {
		g.numAwaiting++
	} else if ch == nil && m.awaitingJoin() {
		g.numAwaiting--
	}
	m.joinCh = ch
}

func (g *group) invokeJoin(m *member, r joinResult) {
	if m.joinCh == nil {
		return
	}
	m.joinCh <- r
	m.joinCh = nil
	g.numAwaiting--
}

func (g *group) invokeSync(m *member, assignment []byte, errCode int16) bool {
	if m.syncCh == nil {
		return false
	}
	m.syncCh <- syncResult{err: errCode, assignment: assignment}
	m.syncCh = nil
	return true
}

// maybeElectNewJoinedLeader: if the leader has not rejoined, any rejoined member leads.
func (g *group) maybeElectNewJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if l := g.members[g.leader]; l != nil && l.awaitingJoin() {
		return true
	}
	for _, id := range g.order {
		if g.members[id].awaitingJoin() {
			g.leader = id
			return true
		}
	}
	return false
}

// initNextGeneration bumps the generation and selects the protocol (Empty when no members).
func (g *group) initNextGeneration() {
	g.generation++
	if len(g.members) > 0 {
		p := g.selectProtocol()
		g.protocol = &p
		g.computeSubscribed()
		g.transition(CompletingRebalance)
	} else {
		g.protocol = nil
		g.computeSubscribed()
		g.transition(Empty)
	}
	g.pendingSync = make(map[string]bool)
}

// computeSubscribed is ClassicGroup.computeSubscribedTopics: for protocol type
// "consumer", the union of the members' subscriptions (ConsumerProtocolSubscription);
// nil (unknown) if any cannot be parsed.
func (g *group) computeSubscribed() {
	g.subscribed = nil
	if !g.protocolTypeIs("consumer") || g.protocol == nil {
		if len(g.members) == 0 && g.protocolTypeIs("consumer") {
			g.subscribed = map[string]bool{}
		}
		return
	}
	sub := make(map[string]bool)
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(*g.protocol)); err != nil {
			return
		}
		for _, t := range meta.Topics {
			sub[t] = true
		}
	}
	g.subscribed = sub
}

func (g *group) isSubscribedTo(topic string) bool {
	if g.subscribed == nil {
		return true
	}
	return g.subscribed[topic]
}

func (g *group) currentMemberMetadata() []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.members))
	for _, id := range g.order {
		m := g.members[id]
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.InstanceID = m.instanceID
		if g.protocol != nil {
			jm.ProtocolMetadata = m.metadataFor(*g.protocol)
		}
		out = append(out, jm)
	}
	return out
}

func (g *group) stopTimers() {
	g.joinSeq++
	if g.joinTimer != nil {
		g.joinTimer.Stop()
		g.joinTimer = nil
	}
	g.syncSeq++
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
	for id, t := range g.pending {
		t.Stop()
		delete(g.pending, id)
	}
}

// newMemberID is ClassicGroup.generateMemberId: clientId (or group.instance.id for a
// static member) + "-" + a random UUID.
func newMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}
