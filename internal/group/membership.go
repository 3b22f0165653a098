package group

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup serves JoinGroup v0+ (GroupCoordinator.handleJoinGroup). It blocks until the
// rebalance completes or ctx is done. Errors: INVALID_GROUP_ID (empty or longer than
// MaxGroupIDLen), COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR (the group's partition
// is not coordinated here, or it was resigned or the coordinator closed while the member
// waited), INVALID_SESSION_TIMEOUT, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED (v4+, with the
// new member ID), INCONSISTENT_GROUP_PROTOCOL, FENCED_INSTANCE_ID,
// GROUP_MAX_SIZE_REACHED, COORDINATOR_NOT_AVAILABLE. The client ID and host come from
// WithClient.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = req.Version
	if e := c.groupStatus(req.Group, false); e != 0 {
		return buildJoin(resp, joinResult{err: e, memberID: req.MemberID})
	}
	if req.SessionTimeoutMillis < c.opts.GroupMinSessionTimeoutMs || req.SessionTimeoutMillis > c.opts.GroupMaxSessionTimeoutMs {
		return buildJoin(resp, joinResult{err: errInvalidSessionTimeout, memberID: req.MemberID})
	}
	if req.Version == 0 {
		req.RebalanceTimeoutMillis = req.SessionTimeoutMillis
	}
	protocols := make([]protocol, 0, len(req.Protocols))
	for _, p := range req.Protocols {
		protocols = append(protocols, protocol{name: p.Name, metadata: p.Metadata})
	}
	isUnknown := req.MemberID == ""
	g, e := c.getGroup(req.Group, isUnknown)
	if e != 0 {
		return buildJoin(resp, joinResult{err: e, memberID: req.MemberID})
	}
	if g == nil {
		return buildJoin(resp, joinResult{err: errUnknownMemberID, memberID: req.MemberID})
	}
	ch := make(chan joinResult, 1)
	j := joinCall{req: req, protocols: protocols, ch: ch, client: clientFrom(ctx)}

	g.mu.Lock()
	switch {
	case !c.acceptJoiningMember(g, req.MemberID):
		if m := g.members[req.MemberID]; m != nil {
			c.removeMember(g, m)
		}
		ch <- joinResult{err: errGroupMaxSizeReached}
	case isUnknown:
		c.doNewMemberJoin(g, j)
	default:
		c.doCurrentMemberJoin(g, j)
	}
	if g.is(PreparingRebalance) {
		c.checkJoinComplete(g)
	}
	g.mu.Unlock()

	select {
	case r := <-ch:
		return buildJoin(resp, r)
	case <-ctx.Done():
		return buildJoin(resp, joinResult{err: errCoordinatorNotAvailable, memberID: req.MemberID})
	}
}

type joinCall struct {
	req       *kmsg.JoinGroupRequest
	protocols []protocol
	ch        chan joinResult
	client    clientInfo
}

func buildJoin(resp *kmsg.JoinGroupResponse, r joinResult) *kmsg.JoinGroupResponse {
	resp.ErrorCode = r.err
	resp.MemberID = r.memberID
	resp.Generation = -1
	if r.err == 0 {
		resp.Generation = r.generation
		resp.ProtocolType = r.protocolType
		resp.Protocol = r.protocol
		resp.LeaderID = r.leader
		resp.SkipAssignment = r.skip
		resp.Members = r.members
	}
	return resp
}

// acceptJoiningMember is GroupCoordinator.acceptJoiningMember (group.max.size).
func (c *Coordinator) acceptJoiningMember(g *group, memberID string) bool {
	max := int(c.opts.GroupMaxSize)
	switch g.state {
	case Empty, Dead:
		return true
	case PreparingRebalance:
		m := g.members[memberID]
		return (m != nil && m.awaitingJoin()) || g.numAwaiting < max
	default:
		return g.has(memberID) || len(g.members) < max
	}
}

func (c *Coordinator) doNewMemberJoin(g *group, j joinCall) {
	req := j.req
	if g.is(Dead) {
		j.ch <- joinResult{err: errCoordinatorNotAvailable}
		return
	}
	if !g.supportsProtocols(req.ProtocolType, j.protocols) {
		j.ch <- joinResult{err: errInconsistentGroupProtocol}
		return
	}
	newID := newMemberID(j.client.id, req.InstanceID)
	switch {
	case req.InstanceID != nil && g.hasStatic(req.InstanceID):
		c.updateStaticMemberAndRebalance(g, g.static[*req.InstanceID], newID, j)
	case req.InstanceID == nil && req.Version >= 4:
		// KIP-394: a dynamic member must rejoin with the member ID it is given.
		c.addPendingMember(g, newID, time.Duration(req.SessionTimeoutMillis)*time.Millisecond)
		j.ch <- joinResult{err: errMemberIDRequired, memberID: newID}
	default:
		c.addMemberAndRebalance(g, newID, j)
	}
}

func (c *Coordinator) doCurrentMemberJoin(g *group, j joinCall) {
	req := j.req
	id := req.MemberID
	if g.is(Dead) {
		j.ch <- joinResult{err: errCoordinatorNotAvailable, memberID: id}
		return
	}
	if !g.supportsProtocols(req.ProtocolType, j.protocols) {
		j.ch <- joinResult{err: errInconsistentGroupProtocol, memberID: id}
		return
	}
	if _, ok := g.pending[id]; ok {
		c.addMemberAndRebalance(g, id, j)
		return
	}
	if g.isStaticMemberFenced(id, req.InstanceID) {
		j.ch <- joinResult{err: errFencedInstanceID, memberID: id}
		return
	}
	m := g.members[id]
	if m == nil || (req.InstanceID != nil && !g.hasStatic(req.InstanceID)) {
		j.ch <- joinResult{err: errUnknownMemberID, memberID: id}
		return
	}
	switch g.state {
	case PreparingRebalance:
		c.updateMemberAndRebalance(g, m, j)
	case CompletingRebalance:
		if m.matches(j.protocols) {
			// The member missed the JoinGroup response: answer it again.
			r := g.joinResultFor(m)
			j.ch <- r
		} else {
			c.updateMemberAndRebalance(g, m, j)
		}
	case Stable:
		if g.isLeader(id) || !m.matches(j.protocols) {
			// The leader rejoining forces a rebalance (e.g. for metadata changes).
			c.updateMemberAndRebalance(g, m, j)
		} else {
			j.ch <- joinResult{memberID: id, generation: g.generation, protocolType: g.protocolType,
				protocol: g.protocol, leader: g.leader}
		}
	default:
		j.ch <- joinResult{err: errUnknownMemberID, memberID: id}
	}
}

// joinResult is the successful JoinGroup answer for m in the current generation (the
// leader gets every member's metadata).
func (g *group) joinResultFor(m *member) joinResult {
	r := joinResult{memberID: m.id, generation: g.generation, protocolType: g.protocolType,
		protocol: g.protocol, leader: g.leader}
	if g.isLeader(m.id) {
		r.members = g.currentMemberMetadata()
	}
	return r
}

func (c *Coordinator) addPendingMember(g *group, id string, timeout time.Duration) {
	if t, ok := g.pending[id]; ok {
		t.Stop()
	}
	g.pending[id] = time.AfterFunc(timeout, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if _, ok := g.pending[id]; !ok || c.closed.Load() {
			return
		}
		delete(g.pending, id)
		if g.is(PreparingRebalance) {
			c.checkJoinComplete(g)
		}
	})
}

func (c *Coordinator) addMemberAndRebalance(g *group, id string, j joinCall) {
	req := j.req
	m := &member{
		id:                 id,
		instanceID:         req.InstanceID,
		clientID:           j.client.id,
		clientHost:         j.client.host,
		rebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		sessionTimeoutMs:   req.SessionTimeoutMillis,
		protocolType:       req.ProtocolType,
		protocols:          j.protocols,
		isNew:              true,
	}
	if g.is(PreparingRebalance) && g.generation == 0 {
		g.newMemberAdded = true
	}
	g.add(m, j.ch)
	// A new member cannot heartbeat while it waits in JoinGroup: it is removed if the
	// join does not complete within NewMemberJoinTimeoutMs.
	c.scheduleHeartbeat(g, m, newMemberJoinTimeout)
	c.maybePrepareRebalance(g, "adding new member "+id)
}

func (c *Coordinator) updateMemberAndRebalance(g *group, m *member, j joinCall) {
	g.updateMember(m, j.protocols, j.req.RebalanceTimeoutMillis, j.req.SessionTimeoutMillis, j.ch)
	c.maybePrepareRebalance(g, "updating metadata for member "+m.id)
}

// replaceStaticMember gives the static member oldID the member ID newID, fencing any
// request still waiting under the old ID.
func (g *group) replaceStaticMember(oldID, newID string) *member {
	m := g.members[oldID]
	fenced := joinResult{err: errFencedInstanceID, memberID: oldID}
	g.invokeJoin(m, fenced)
	g.invokeSync(m, nil, errFencedInstanceID)
	m.stopTimer()
	delete(g.members, oldID)
	m.id = newID
	g.members[newID] = m
	for i, x := range g.order {
		if x == oldID {
			g.order[i] = newID
		}
	}
	g.static[*m.instanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	return m
}

// updateStaticMemberAndRebalance is GroupCoordinator.updateStaticMemberAndRebalance: a
// known group.instance.id joining with an unknown member ID takes over the old member.
// While Stable, if the selected protocol does not change, no rebalance happens: the
// member keeps its assignment (fetched by its SyncGroup).
func (c *Coordinator) updateStaticMemberAndRebalance(g *group, oldID, newID string, j joinCall) {
	req := j.req
	m := g.members[oldID]
	currentLeader := g.leader
	oldProtocols, oldRebalance, oldSession := m.protocols, m.rebalanceTimeoutMs, m.sessionTimeoutMs
	g.replaceStaticMember(oldID, newID)
	c.scheduleHeartbeat(g, m, time.Duration(m.sessionTimeoutMs)*time.Millisecond)
	g.updateMember(m, j.protocols, req.RebalanceTimeoutMillis, req.SessionTimeoutMillis, j.ch)
	m.clientID, m.clientHost = j.client.id, j.client.host

	switch g.state {
	case Stable:
		if g.protocol != nil && *g.protocol == g.selectProtocol() {
			if err := c.storeGroup(g, nil); err != nil {
				// Revert to the old member ID so that the old member is not fenced.
				g.updateMember(m, oldProtocols, oldRebalance, oldSession, nil)
				g.replaceStaticMember(newID, oldID)
				c.scheduleHeartbeat(g, m, time.Duration(m.sessionTimeoutMs)*time.Millisecond)
				j.ch <- joinResult{err: storeErrorCode(err)}
				return
			}
			r := joinResult{memberID: newID, generation: g.generation, protocolType: g.protocolType,
				protocol: g.protocol, leader: currentLeader}
			if g.isLeader(newID) && req.Version >= 9 {
				// KIP-814: the leader learns it leads but must not compute a new assignment.
				r.leader, r.skip, r.members = newID, true, g.currentMemberMetadata()
			}
			g.invokeJoin(m, r)
		} else {
			c.maybePrepareRebalance(g, "static member "+newID+" changed the selected protocol")
		}
	case CompletingRebalance:
		// The leader may already have the old member ID in its assignment: rebalance.
		c.prepareRebalance(g, "static member "+newID+" rejoined while completing rebalance")
	}
}

func (c *Coordinator) maybePrepareRebalance(g *group, reason string) {
	if g.canRebalance() {
		c.prepareRebalance(g, reason)
	}
}

// prepareRebalance is GroupCoordinator.prepareRebalance: members waiting in SyncGroup
// are told REBALANCE_IN_PROGRESS; a group that was Empty waits
// group.initial.rebalance.delay.ms (InitialDelayedJoin), otherwise the join completes
// once every member rejoined or the rebalance timeout passes (DelayedJoin).
func (c *Coordinator) prepareRebalance(g *group, reason string) {
	if g.is(CompletingRebalance) {
		c.resetAndPropagateAssignmentError(g, errRebalanceInProgress)
	}
	g.syncSeq++
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
	wasEmpty := g.is(Empty)
	g.transition(PreparingRebalance)
	c.log.Info("preparing to rebalance group", "group", g.id, "generation", g.generation, "reason", reason)
	if wasEmpty {
		delay := time.Duration(c.opts.GroupInitialRebalanceDelayMs) * time.Millisecond
		remaining := g.rebalanceTimeout() - delay
		if remaining < 0 {
			remaining = 0
		}
		g.initialDelay = true
		c.scheduleInitialJoin(g, delay, remaining)
		return
	}
	g.initialDelay = false
	c.scheduleJoin(g, g.rebalanceTimeout())
	c.checkJoinComplete(g)
}

func (c *Coordinator) scheduleJoin(g *group, d time.Duration) {
	c.setJoinTimer(g, d, func() { c.completeJoin(g) })
}

func (c *Coordinator) scheduleInitialJoin(g *group, delay, remaining time.Duration) {
	initial := time.Duration(c.opts.GroupInitialRebalanceDelayMs) * time.Millisecond
	c.setJoinTimer(g, delay, func() {
		if g.newMemberAdded && remaining != 0 {
			g.newMemberAdded = false
			next := min(initial, remaining)
			c.scheduleInitialJoin(g, next, max(remaining-initial, 0))
			return
		}
		c.completeJoin(g)
	})
}

func (c *Coordinator) setJoinTimer(g *group, d time.Duration, fn func()) {
	g.joinSeq++
	seq := g.joinSeq
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	g.joinTimer = time.AfterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if seq != g.joinSeq || c.closed.Load() || !g.is(PreparingRebalance) {
			return
		}
		fn()
	})
}

// checkJoinComplete completes the join phase early once every member has rejoined
// (DelayedJoin.tryComplete; never during the initial delay).
func (c *Coordinator) checkJoinComplete(g *group) {
	if g.is(PreparingRebalance) && !g.initialDelay && g.hasAllMembersJoined() {
		c.completeJoin(g)
	}
}

// completeJoin is GroupCoordinator.onCompleteJoin.
func (c *Coordinator) completeJoin(g *group) {
	g.joinSeq++
	if g.joinTimer != nil {
		g.joinTimer.Stop()
		g.joinTimer = nil
	}
	g.initialDelay = false
	if !g.is(PreparingRebalance) {
		return
	}
	// Dynamic members that did not rejoin in time are removed.
	for _, id := range append([]string(nil), g.order...) {
		m := g.members[id]
		if !m.awaitingJoin() && m.instanceID == nil {
			m.leaving = true
			g.remove(id)
		}
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// Only static members that have not rejoined: wait for them again, until their
		// sessions expire.
		c.log.Warn("group could not complete rebalance because no members rejoined", "group", g.id)
		c.scheduleJoin(g, g.rebalanceTimeout())
		return
	}
	g.initNextGeneration()
	if g.is(Empty) {
		c.log.Info("group is now empty", "group", g.id, "generation", g.generation)
		if err := c.storeGroup(g, nil); err != nil {
			c.log.Warn("failed to write empty group metadata", "group", g.id, "err", err)
		}
		return
	}
	c.log.Info("stabilized group", "group", g.id, "generation", g.generation, "protocol", *g.protocol, "members", len(g.members))
	for _, id := range g.order {
		m := g.members[id]
		g.invokeJoin(m, g.joinResultFor(m))
		c.scheduleHeartbeat(g, m, time.Duration(m.sessionTimeoutMs)*time.Millisecond)
		m.isNew = false
		g.pendingSync[id] = true
	}
	c.schedulePendingSync(g)
}

// schedulePendingSync removes members that do not send SyncGroup within the rebalance
// timeout after the join phase, and rebalances (GroupCoordinator.schedulePendingSync).
func (c *Coordinator) schedulePendingSync(g *group) {
	g.syncSeq++
	seq, gen := g.syncSeq, g.generation
	if g.syncTimer != nil {
		g.syncTimer.Stop()
	}
	g.syncTimer = time.AfterFunc(g.rebalanceTimeout(), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if seq != g.syncSeq || c.closed.Load() || gen != g.generation || len(g.pendingSync) == 0 ||
			!(g.is(CompletingRebalance) || g.is(Stable)) {
			return
		}
		for id := range g.pendingSync {
			if m := g.members[id]; m != nil {
				m.leaving = true
				g.invokeSync(m, nil, errUnknownMemberID)
				g.remove(id)
			}
		}
		c.prepareRebalance(g, "members did not sync in time")
	})
}

func (c *Coordinator) resetAndPropagateAssignmentError(g *group, code int16) {
	for _, m := range g.members {
		m.assignment = nil
	}
	c.propagateAssignment(g, code)
}

func (c *Coordinator) propagateAssignment(g *group, code int16) {
	for _, m := range g.members {
		if g.invokeSync(m, m.assignment, code) {
			c.scheduleHeartbeat(g, m, time.Duration(m.sessionTimeoutMs)*time.Millisecond)
		}
	}
}

// scheduleHeartbeat completes the member's current heartbeat expectation and expects
// the next one within d (completeAndScheduleNextExpiration).
func (c *Coordinator) scheduleHeartbeat(g *group, m *member, d time.Duration) {
	m.latestHeartbeat = nowMs()
	m.stopTimer()
	seq := m.hbSeq
	m.hbTimer = time.AfterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if seq != m.hbSeq || c.closed.Load() || g.members[m.id] != m {
			return
		}
		c.onExpireHeartbeat(g, m)
	})
}

// onExpireHeartbeat: a member waiting in JoinGroup or SyncGroup is kept (unless new);
// otherwise it failed and is removed, which rebalances the group.
func (c *Coordinator) onExpireHeartbeat(g *group, m *member) {
	if m.leaving {
		return
	}
	if !m.isNew && (m.awaitingJoin() || m.awaitingSync()) {
		return
	}
	c.log.Info("member failed to heartbeat; removing it", "group", g.id, "member", m.id)
	c.removeMember(g, m)
}

// removeMember is removeMemberAndUpdateGroup.
func (c *Coordinator) removeMember(g *group, m *member) {
	g.invokeJoin(m, joinResult{err: errUnknownMemberID})
	g.invokeSync(m, nil, errUnknownMemberID)
	m.leaving = true
	g.remove(m.id)
	switch g.state {
	case Stable, CompletingRebalance:
		c.maybePrepareRebalance(g, "removing member "+m.id)
	case PreparingRebalance:
		c.checkJoinComplete(g)
	}
}

// SyncGroup serves SyncGroup v0+ (GroupCoordinator.handleSyncGroup). The leader's
// assignment is stored in __consumer_offsets before anyone gets an answer; followers
// block until then or ctx is done. Errors: INVALID_GROUP_ID, REBALANCE_IN_PROGRESS (also
// while loading), NOT_COORDINATOR (also to a waiting member on resignation),
// UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL
// (v5+ protocol type/name mismatch), COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = req.Version
	fail := func(code int16) *kmsg.SyncGroupResponse {
		resp.ErrorCode = code
		return resp
	}
	if e := c.groupStatus(req.Group, false); e != 0 {
		if e == errCoordinatorLoadInProgress {
			// The rebalance state was lost: have the member rejoin.
			e = errRebalanceInProgress
		}
		return fail(e)
	}
	g, e := c.getGroup(req.Group, false)
	if e == errCoordinatorLoadInProgress {
		e = errRebalanceInProgress
	}
	if e != 0 {
		return fail(e)
	}
	if g == nil {
		return fail(errUnknownMemberID)
	}
	g.mu.Lock()
	m := g.members[req.MemberID]
	switch {
	case g.is(Dead):
		g.mu.Unlock()
		return fail(errCoordinatorNotAvailable)
	case g.isStaticMemberFenced(req.MemberID, req.InstanceID):
		g.mu.Unlock()
		return fail(errFencedInstanceID)
	case m == nil:
		g.mu.Unlock()
		return fail(errUnknownMemberID)
	case req.Generation != g.generation:
		g.mu.Unlock()
		return fail(errIllegalGeneration)
	case req.ProtocolType != nil && !g.protocolTypeIs(*req.ProtocolType),
		req.Protocol != nil && (g.protocol == nil || *g.protocol != *req.Protocol):
		g.mu.Unlock()
		return fail(errInconsistentGroupProtocol)
	}
	ptype, pname := g.protocolType, g.protocol
	switch g.state {
	case Empty:
		g.mu.Unlock()
		return fail(errUnknownMemberID)
	case PreparingRebalance:
		g.mu.Unlock()
		return fail(errRebalanceInProgress)
	case Stable:
		delete(g.pendingSync, m.id)
		resp.MemberAssignment = m.assignment
		c.scheduleHeartbeat(g, m, time.Duration(m.sessionTimeoutMs)*time.Millisecond)
		g.mu.Unlock()
		resp.ProtocolType, resp.Protocol = ptype, pname
		return resp
	}
	// CompletingRebalance: wait for the leader's assignment.
	ch := make(chan syncResult, 1)
	m.syncCh = ch
	delete(g.pendingSync, m.id)
	if g.isLeader(m.id) {
		assignment := make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			assignment[a.MemberID] = a.MemberAssignment
		}
		if err := c.storeGroup(g, assignment); err != nil {
			c.resetAndPropagateAssignmentError(g, storeErrorCode(err))
			c.maybePrepareRebalance(g, "error storing the group assignment")
		} else {
			for _, gm := range g.members {
				gm.assignment = assignment[gm.id]
			}
			c.propagateAssignment(g, 0)
			g.transition(Stable)
		}
	}
	g.mu.Unlock()
	select {
	case r := <-ch:
		resp.ErrorCode = r.err
		if r.err == 0 {
			resp.MemberAssignment = r.assignment
			resp.ProtocolType, resp.Protocol = ptype, pname
		}
		return resp
	case <-ctx.Done():
		return fail(errCoordinatorNotAvailable)
	}
}

// Heartbeat serves Heartbeat v0+ (GroupCoordinator.handleHeartbeat). Errors:
// INVALID_GROUP_ID, NOT_COORDINATOR, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS (the member must rejoin),
// COORDINATOR_NOT_AVAILABLE; NONE while loading, as Kafka.
func (c *Coordinator) Heartbeat(_ context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version = req.Version
	if e := c.groupStatus(req.Group, false); e != 0 {
		if e != errCoordinatorLoadInProgress {
			resp.ErrorCode = e
		}
		return resp
	}
	g, e := c.getGroup(req.Group, false)
	if e != 0 {
		if e != errCoordinatorLoadInProgress {
			resp.ErrorCode = e
		}
		return resp
	}
	if g == nil {
		resp.ErrorCode = errUnknownMemberID
		return resp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.members[req.MemberID]
	switch {
	case g.is(Dead):
		resp.ErrorCode = errCoordinatorNotAvailable
	case g.isStaticMemberFenced(req.MemberID, req.InstanceID):
		resp.ErrorCode = errFencedInstanceID
	case m == nil:
		resp.ErrorCode = errUnknownMemberID
	case req.Generation != g.generation:
		resp.ErrorCode = errIllegalGeneration
	case g.is(Empty):
		resp.ErrorCode = errUnknownMemberID
	case g.is(PreparingRebalance):
		c.scheduleHeartbeat(g, m, time.Duration(m.sessionTimeoutMs)*time.Millisecond)
		resp.ErrorCode = errRebalanceInProgress
	default: // CompletingRebalance (the member got its JoinGroup answer) or Stable
		c.scheduleHeartbeat(g, m, time.Duration(m.sessionTimeoutMs)*time.Millisecond)
	}
	return resp
}

// LeaveGroup serves LeaveGroup v0+ (batched members from v3; GroupCoordinator
// .handleLeaveGroup). Per-member errors: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID; a static
// member may be removed by group.instance.id alone (empty member ID). For v0-v2 the
// member's error is the top-level error.
func (c *Coordinator) LeaveGroup(_ context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = req.Version
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	if e := c.groupStatus(req.Group, false); e != 0 {
		resp.ErrorCode = e
		return resp
	}
	errs := make([]int16, len(leaving))
	g, e := c.getGroup(req.Group, false)
	if e != 0 {
		resp.ErrorCode = e
		return resp
	}
	if g == nil {
		for i := range errs {
			errs[i] = errUnknownMemberID
		}
	} else {
		g.mu.Lock()
		if g.is(Dead) {
			g.mu.Unlock()
			resp.ErrorCode = errCoordinatorNotAvailable
			return resp
		}
		for i, l := range leaving {
			errs[i] = c.leaveOne(g, l.MemberID, l.InstanceID)
		}
		g.mu.Unlock()
	}
	if req.Version < 3 {
		resp.ErrorCode = errs[0]
		return resp
	}
	for i, l := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = l.MemberID, l.InstanceID, errs[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

func (c *Coordinator) leaveOne(g *group, memberID string, instanceID *string) int16 {
	if memberID != "" && g.isStaticMemberFenced(memberID, instanceID) {
		return errFencedInstanceID
	}
	if _, ok := g.pending[memberID]; ok {
		g.pending[memberID].Stop()
		delete(g.pending, memberID)
		if g.is(PreparingRebalance) {
			c.checkJoinComplete(g)
		}
		return 0
	}
	var m *member
	if g.hasStatic(instanceID) {
		m = g.members[g.static[*instanceID]]
	} else {
		m = g.members[memberID]
	}
	if m == nil {
		return errUnknownMemberID
	}
	c.log.Info("member left the group", "group", g.id, "member", m.id)
	c.removeMember(g, m)
	return 0
}
