package group

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/record"
)

// GroupType is the type every group of this coordinator has in ListGroups v5+.
const GroupType = "classic"

// groupAuthorizedOperations is the bit field of READ (3), DELETE (6) and DESCRIBE (8),
// returned when DescribeGroups asks for authorized operations (no authorizer).
const groupAuthorizedOperations = 1<<3 | 1<<6 | 1<<8

// ListGroups serves ListGroups v0+ (StatesFilter v4+, TypesFilter v5+; both
// case-insensitive, type "classic") with the groups of the loaded partitions
// (GroupCoordinator.handleListGroups): ErrorCode is COORDINATOR_LOAD_IN_PROGRESS while
// any elected partition is loading (the groups already loaded are listed too),
// COORDINATOR_NOT_AVAILABLE once closed.
func (c *Coordinator) ListGroups(_ context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = req.Version
	if c.closed.Load() {
		resp.ErrorCode = errCoordinatorNotAvailable
		return resp
	}
	c.mu.Lock()
	for _, part := range c.parts {
		if part.state == partLoading {
			resp.ErrorCode = errCoordinatorLoadInProgress
			break
		}
	}
	c.mu.Unlock()
	if len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, GroupType) {
		return resp
	}
	groups := c.allGroups()
	sort.Slice(groups, func(i, j int) bool { return groups[i].id < groups[j].id })
	for _, g := range groups {
		g.mu.Lock()
		state, ptype := g.state, ""
		if g.protocolType != nil {
			ptype = *g.protocolType
		}
		g.mu.Unlock()
		if state == Dead || (len(req.StatesFilter) > 0 && !containsFold(req.StatesFilter, state.String())) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.id, ptype, state.String(), GroupType
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

func containsFold(s []string, v string) bool {
	for _, x := range s {
		if strings.EqualFold(x, v) {
			return true
		}
	}
	return false
}

// DescribeGroups serves DescribeGroups v0+ (GroupCoordinator.handleDescribeGroup). A
// Stable group's members carry their metadata for the selected protocol and their
// assignment; other states list members without them. An absent group is state "Dead"
// with no error before v6, and GROUP_ID_NOT_FOUND from v6 (as Kafka 4). Per-group
// errors: INVALID_GROUP_ID, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) DescribeGroups(_ context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = req.Version
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		dg.AuthorizedOperations = -2147483648
		if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupAuthorizedOperations
		}
		if e := c.groupStatus(id, true); e != 0 {
			dg.ErrorCode = e
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		g, e := c.getGroup(id, false)
		if e != 0 {
			dg.ErrorCode = e
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		if g != nil {
			g.mu.Lock()
			if g.is(Dead) {
				g.mu.Unlock()
				g = nil
			}
		}
		if g == nil {
			dg.State = Dead.String()
			if req.Version >= 6 {
				dg.ErrorCode = errGroupIDNotFound
				msg := "Group " + id + " not found."
				dg.ErrorMessage = &msg
			}
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		dg.State = g.state.String()
		if g.protocolType != nil {
			dg.ProtocolType = *g.protocolType
		}
		stable := g.is(Stable) && g.protocol != nil
		if stable {
			dg.Protocol = *g.protocol
		}
		for _, mid := range g.order {
			m := g.members[mid]
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
			if stable {
				dm.ProtocolMetadata = m.metadataFor(*g.protocol)
				dm.MemberAssignment = m.assignment
			}
			dg.Members = append(dg.Members, dm)
		}
		g.mu.Unlock()
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// DeleteGroups serves DeleteGroups v0+ (GroupCoordinator.handleDeleteGroups): an Empty
// group's metadata and offsets are deleted (tombstones; for partitions with only pending
// transactional offsets too, as Kafka 4's OffsetMetadataManager.deleteAllOffsets).
// Per-group errors: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, INVALID_GROUP_ID,
// COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR.
func (c *Coordinator) DeleteGroups(_ context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Version = req.Version
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		rg.ErrorCode = c.deleteGroup(id)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (c *Coordinator) deleteGroup(id string) int16 {
	if e := c.groupStatus(id, true); e != 0 {
		return e
	}
	g, e := c.getGroup(id, false)
	if e != 0 {
		return e
	}
	if g == nil {
		return errGroupIDNotFound
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case Dead:
		return errGroupIDNotFound
	case Empty:
	default:
		return errNonEmptyGroup
	}
	all := make(map[kafka.TopicPartition]offsetEntry, len(g.offsets))
	for k, o := range g.offsets {
		all[k] = o
	}
	for _, offs := range g.pendingTxn {
		for k, o := range offs {
			all[k] = o
		}
	}
	recs := make([]record.KV, 0, len(all)+1)
	for _, k := range sortedTPs(all) {
		recs = append(recs, offsetTombstone(g.id, k))
	}
	recs = append(recs, record.KV{Key: groupKey(g.id)})
	if _, err := c.appendRecords(g, recs); err != nil {
		return storeErrorCode(err)
	}
	g.stopTimers()
	g.offsets = make(map[kafka.TopicPartition]offsetEntry)
	g.pendingTxn = make(map[int64]map[kafka.TopicPartition]offsetEntry)
	g.transition(Dead)
	c.removeGroup(g)
	c.log.Info("deleted group", "group", id, "offsets", len(recs)-1)
	return 0
}

// GroupState returns the group's state with Kafka's names (Empty, Stable,
// PreparingRebalance, CompletingRebalance, Dead) and whether the group exists among
// the groups of the partitions loaded here; for Cluster Mirroring's group offset sync
// (spec section 9).
func (c *Coordinator) GroupState(groupID string) (state string, exists bool) {
	g, _ := c.getGroup(groupID, false)
	if g == nil {
		return Dead.String(), false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state.String(), g.state != Dead
}

// Access reads and writes a cluster's consumer groups at their coordinators, wherever they
// are (the mirror's group offset sync, spec section 9): the broker answers from its own
// coordinator for the groups it coordinates and asks the others' coordinators.
type Access interface {
	// GroupState is the group's state name (Empty, Stable, ...) and whether it exists.
	GroupState(ctx context.Context, groupID string) (state string, exists bool, err error)
	// CommittedOffsets are the group's committed offsets by topic and partition.
	CommittedOffsets(ctx context.Context, groupID string) (map[string]map[int32]Offset, error)
	// SyncOffsets writes offsets of an Empty or absent group (creating it Empty).
	SyncOffsets(ctx context.Context, groupID string, offsets map[string]map[int32]Offset) error
}

// CommittedOffsets returns a copy of the group's committed offsets by topic and
// partition (nil if the group does not exist or its partition is not loaded here);
// pending transactional offsets are not included; spec section 9.
func (c *Coordinator) CommittedOffsets(groupID string) map[string]map[int32]Offset {
	g, _ := c.getGroup(groupID, false)
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.is(Dead) {
		return nil
	}
	out := make(map[string]map[int32]Offset)
	for k, o := range g.offsets {
		if out[k.Topic] == nil {
			out[k.Topic] = make(map[int32]Offset)
		}
		out[k.Topic][k.Partition] = o.Offset
	}
	return out
}

// ErrGroupActive is returned (wrapped, naming the state) by SyncOffsets for a group that
// is not Empty on this cluster.
var ErrGroupActive = errors.New("group is active on this cluster")

// SyncOffsets writes offsets for a group that is Empty or absent (creating it as an
// Empty group with no protocol type, like a simple commit), as Cluster Mirroring's group
// offset sync (spec section 9) does. A zero CommitTimestampMs is set to now; offsets are
// stored as given (clamping is the caller's). Errors: ErrGroupActive naming the state;
// COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR for a partition not
// coordinated here (both as kerr errors); append errors.
func (c *Coordinator) SyncOffsets(groupID string, offsets map[string]map[int32]Offset) error {
	if e := c.groupStatus(groupID, false); e != 0 {
		return fmt.Errorf("group %q: %w", groupID, kerrFor(e))
	}
	g, e := c.getGroup(groupID, true)
	if e != 0 {
		return fmt.Errorf("group %q: %w", groupID, kerrFor(e))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.is(Dead) { // deleted or unloaded meanwhile
		return fmt.Errorf("group %q: %w", groupID, kerr.CoordinatorNotAvailable)
	}
	if !g.is(Empty) {
		return fmt.Errorf("group %q is %s: %w", groupID, g.state, ErrGroupActive)
	}
	now := nowMs()
	var recs []record.KV
	entries := make(map[kafka.TopicPartition]offsetEntry)
	for topic, parts := range offsets {
		for p, o := range parts {
			if o.CommitTimestampMs == 0 {
				o.CommitTimestampMs = now
			}
			k := kafka.TopicPartition{Topic: topic, Partition: p}
			e := offsetEntry{Offset: o, expireMs: -1}
			entries[k] = e
			recs = append(recs, offsetRecord(g.id, k, e))
		}
	}
	base, err := c.appendRecords(g, recs)
	if err != nil {
		return err
	}
	for k, e := range entries {
		e.batchOffset = base
		g.offsets[k] = e
	}
	return nil
}

// ListGroupIDs returns the IDs of every group of the loaded partitions (any state but
// Dead), sorted.
func (c *Coordinator) ListGroupIDs() []string {
	var ids []string
	for _, g := range c.allGroups() {
		g.mu.Lock()
		if !g.is(Dead) {
			ids = append(ids, g.id)
		}
		g.mu.Unlock()
	}
	sort.Strings(ids)
	return ids
}

func sortedTPs(m map[kafka.TopicPartition]offsetEntry) []kafka.TopicPartition {
	out := make([]kafka.TopicPartition, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func kerrFor(code int16) error { return kerr.ErrorForCode(code) }
