package mirror

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

func strp(s string) *string { return &s }

// oneLine keeps an error message on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// sourceTimeout bounds the source round trips made inside an admin RPC.
func sourceTimeout(cfg *mirrorConfig) time.Duration {
	return min(cfg.requestTimeout, 15*time.Second)
}

// svoMoved implements StateValidationOffset (spec section 10): the request is refused when
// the metadata image moved past the offset the caller validated at. kmirror keeps one
// metadata offset, not one per topic, so any later metadata change refuses it.
func svoMoved(svo int64, im *metadata.Image) bool {
	return svo >= 0 && uint64(svo) < im.Offset
}

// image returns this node's metadata image, caught up with the active controller first
// (metadata.Controller.CatchUp) when stale reports that it lacks what the request names:
// a mirror created through one node a moment ago is then usable through every other.
func (m *Manager) image(ctx context.Context, stale func(*metadata.Image) bool) *metadata.Image {
	im := m.local.Metadata().Image()
	if !stale(im) {
		return im
	}
	if err := m.local.Metadata().CatchUp(ctx); err != nil {
		m.log.Debug("metadata catch-up failed", "err", err)
	}
	return m.local.Metadata().Image()
}

// lookupMirror returns the current image and the named mirror, or UNKNOWN_CLUSTER_MIRROR;
// the image is caught up first when it lacks the mirror or is older than offset minOffset
// (−1: none), the StateValidationOffset a client read from another node.
func (m *Manager) lookupMirror(ctx context.Context, name string, minOffset int64) (*metadata.Image, *metadata.Mirror, *mirrorproto.Error) {
	im := m.image(ctx, func(im *metadata.Image) bool {
		return im.Mirrors[name] == nil || (minOffset >= 0 && uint64(minOffset) > im.Offset)
	})
	mir, ok := im.Mirrors[name]
	if !ok {
		return nil, nil, &mirrorproto.Error{Code: mirrorproto.UnknownClusterMirror, Message: fmt.Sprintf("cluster mirror %s does not exist", name)}
	}
	return im, mir, nil
}

// mirrorAt is lookupMirror followed by the check every mirror operation answers next:
// INVALID_CLUSTER_MIRROR_STATES when the metadata moved past StateValidationOffset svo
// (−1 skips the check).
func (m *Manager) mirrorAt(ctx context.Context, name string, svo int64) (*metadata.Image, *metadata.Mirror, *mirrorproto.Error) {
	im, mir, merr := m.lookupMirror(ctx, name, svo)
	if merr != nil {
		return nil, nil, merr
	}
	if svoMoved(svo, im) {
		return nil, nil, &mirrorproto.Error{Code: mirrorproto.InvalidClusterMirrorStates, Message: fmt.Sprintf("the mirror states changed since metadata offset %d", svo)}
	}
	return im, mir, nil
}

// legalMirrorName is Kafka's legal topic name alphabet (org.apache.kafka.common.internals.Topic):
// mirror names appear in whitespace-separated CLI columns, metric labels and client IDs.
var legalMirrorName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// maxMirrorNameLen keeps the fetchers' client ID, "kmirror-mirror-" + name, within the
// 256 bytes brokers accept.
const maxMirrorNameLen = 240

// CreateClusterMirror creates a cluster mirror (spec section 10, key 1094): it validates
// the mirror configs (bootstrap.servers required, "mirror."-prefixed aliases accepted),
// resolves the source cluster ID through the source's Metadata and stores the mirror in
// the metadata log. Errors: CLUSTER_MIRROR_ALREADY_EXISTS, INVALID_CONFIG,
// INVALID_REQUEST, NETWORK_EXCEPTION (source unreachable).
func (m *Manager) CreateClusterMirror(ctx context.Context, req *mirrorproto.CreateClusterMirrorRequest) *mirrorproto.CreateClusterMirrorResponse {
	resp := &mirrorproto.CreateClusterMirrorResponse{Versioned: req.Versioned}
	fail := func(code int16, format string, args ...any) *mirrorproto.CreateClusterMirrorResponse {
		resp.ErrorCode = code
		resp.ErrorMessage = strp(oneLine(fmt.Sprintf(format, args...)))
		return resp
	}
	name := strings.TrimSpace(req.MirrorName)
	if name == "" {
		return fail(kerr.InvalidRequest.Code, "the mirror name is empty")
	}
	if !legalMirrorName.MatchString(name) || len(name) > maxMirrorNameLen || name == "." || name == ".." {
		return fail(kerr.InvalidRequest.Code, "mirror name %q: use at most %d of the characters a-z A-Z 0-9 . _ - (as in topic names)", name, maxMirrorNameLen)
	}
	if _, ok := m.local.Metadata().Image().Mirrors[name]; ok {
		return fail(mirrorproto.ClusterMirrorAlreadyExists, "cluster mirror %s already exists", name)
	}
	raw := map[string]string{}
	for _, c := range req.Config {
		raw[canonicalName(c.Name)] = c.Value
	}
	cfg, err := parseMirrorConfig(raw)
	if err != nil {
		return fail(kerr.InvalidConfig.Code, "%v", err)
	}
	for k := range raw {
		if _, ok := findDef(k); !ok && !strings.HasPrefix(k, "ssl.") && !strings.HasPrefix(k, "sasl.") {
			m.log.Warn("unknown cluster mirror config ignored", "mirror", name, "config", k)
		}
	}
	src, err := newSource(name, cfg)
	if err != nil {
		return fail(kerr.InvalidConfig.Code, "%v", err)
	}
	defer src.close()
	rctx, cancel := context.WithTimeout(ctx, sourceTimeout(cfg))
	defer cancel()
	cid, err := src.clusterID(rctx)
	if err != nil {
		return fail(kerr.NetworkException.Code, "cannot reach the source cluster at %s over %s: %v", strings.Join(cfg.bootstrap, ","), cfg.describeSecurity(), err)
	}
	if want := strings.TrimSpace(raw[cfgSourceClusterID]); want != "" && want != cid {
		return fail(kerr.InvalidConfig.Code, "%s %s does not match the source's cluster ID %s", cfgSourceClusterID, want, cid)
	}
	if cid == m.local.ClusterID() {
		return fail(kerr.InvalidConfig.Code, "the source cluster %s is this cluster", cid)
	}
	delete(raw, cfgSourceClusterID)
	if err := m.store.ensure(ctx, m.config().StateTopicPartitions); err != nil {
		return fail(kerr.CoordinatorNotAvailable.Code, "%v", err)
	}
	_, err = m.local.Metadata().Apply(ctx, metadata.MirrorRecord{Name: name, Configs: raw, SourceClusterID: cid, CreatedMs: time.Now().UnixMilli()})
	if errors.Is(err, metadata.ErrMirrorExists) {
		return fail(mirrorproto.ClusterMirrorAlreadyExists, "cluster mirror %s already exists", name)
	}
	if err != nil {
		return fail(kerr.UnknownServerError.Code, "store the cluster mirror: %v", err)
	}
	m.log.Info("cluster mirror created", "mirror", name, "source", strings.Join(cfg.bootstrap, ","), "sourceClusterId", cid)
	m.reconcile()
	return resp
}

// mirrorSource opens a short-lived connection to mir's source for an admin RPC.
func (m *Manager) mirrorSource(mir *metadata.Mirror) (*source, *mirrorConfig, error) {
	cfg, err := parseMirrorConfig(normalizeConfigs(mir.Configs))
	if err != nil {
		return nil, nil, err
	}
	src, err := newSource(mir.Name, cfg)
	if err != nil {
		return nil, nil, err
	}
	return src, cfg, nil
}

// StartMirrorTopics starts mirror topics (spec sections 2, 8 and 10, key 1095): names and
// IncludePatterns (anchored regexes) are resolved against the source topic list, minus
// ExcludePatterns, topics.exclude and internal topics (__*); missing destination topics
// are created with the source topic ID and partition count and the desired state is
// MIRRORING. A pattern never matches a STOPPED topic of the mirror (failed over: only
// its exact name starts it again) nor a topic the source mirrors from this cluster (a
// loop). Per-topic errors: UNKNOWN_TOPIC_OR_PARTITION, TOPIC_ALREADY_IN_CLUSTER_MIRROR,
// TOPIC_ALREADY_EXISTS (same name, another topic ID), INVALID_PARTITIONS,
// MIRROR_TOPIC_BEING_STOPPED, MIRROR_TOPIC_ALREADY_PAUSED (resume it instead),
// INVALID_CLUSTER_MIRROR_STATES (a loop); top level: UNKNOWN_CLUSTER_MIRROR, INVALID_REQUEST (bad
// regex), INVALID_CLUSTER_MIRROR_STATES (StateValidationOffset), NETWORK_EXCEPTION.
func (m *Manager) StartMirrorTopics(ctx context.Context, req *mirrorproto.StartMirrorTopicsRequest) *mirrorproto.StartMirrorTopicsResponse {
	resp := &mirrorproto.StartMirrorTopicsResponse{Versioned: req.Versioned}
	fail := func(code int16, format string, args ...any) *mirrorproto.StartMirrorTopicsResponse {
		resp.ErrorCode = code
		resp.ErrorMessage = strp(oneLine(fmt.Sprintf(format, args...)))
		return resp
	}
	im, mir, merr := m.mirrorAt(ctx, req.MirrorName, req.StateValidationOffset)
	if merr != nil {
		return fail(merr.Code, "%s", merr.Message)
	}
	include, err := compileList(req.IncludePatterns)
	if err != nil {
		return fail(kerr.InvalidRequest.Code, "%v", err)
	}
	exclude, err := compileList(req.ExcludePatterns)
	if err != nil {
		return fail(kerr.InvalidRequest.Code, "%v", err)
	}
	src, cfg, err := m.mirrorSource(mir)
	if err != nil {
		return fail(kerr.InvalidConfig.Code, "%v", err)
	}
	defer src.close()
	rctx, cancel := context.WithTimeout(ctx, sourceTimeout(cfg))
	defer cancel()
	meta, err := src.metadata(rctx, nil)
	if err != nil {
		return fail(kerr.NetworkException.Code, "cannot list the source topics at %s: %v", strings.Join(cfg.bootstrap, ","), err)
	}
	loops, err := src.loopTopics(rctx, m.local.ClusterID())
	if err != nil {
		return fail(kerr.NetworkException.Code, "cannot ask the source at %s which topics it mirrors from this cluster: %v", strings.Join(cfg.bootstrap, ","), err)
	}
	excluded := func(name string) bool {
		return isInternal(name) || matchAny(cfg.exclude, name) || matchAny(exclude, name)
	}
	seen := map[string]bool{}
	var order []string
	results := map[string]mirrorproto.TopicResult{}
	for _, t := range req.Topics {
		name := t.TopicName
		if name == "" && t.TopicID != (metadata.TopicID{}) {
			for n, st := range meta.topics {
				if st.id == t.TopicID {
					name = n
				}
			}
		}
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		order = append(order, name)
		st := meta.topics[name]
		switch {
		case st == nil:
			results[name] = topicErr(name, kerr.UnknownTopicOrPartition.Code, "topic %s does not exist on the source cluster", name)
		case excluded(name):
			results[name] = topicErr(name, kerr.InvalidRequest.Code, "topic %s is excluded from mirroring (internal topic or topics.exclude)", name)
		case t.NumPartitions > 0 && int(t.NumPartitions) != len(st.partitions):
			results[name] = topicErr(name, kerr.InvalidPartitions.Code, "topic %s has %d partitions on the source, not %d", name, len(st.partitions), t.NumPartitions)
		case loops[name] != "":
			results[name] = topicErr(name, mirrorproto.InvalidClusterMirrorStates, "%s; stop it there first", loops[name])
		}
	}
	if len(include) > 0 {
		names := make([]string, 0, len(meta.topics))
		for n := range meta.topics {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if seen[n] || !matchAny(include, n) || excluded(n) {
				continue
			}
			if lt, ok := im.Topics[n]; ok && lt.Mirror != nil {
				if lt.Mirror.MirrorName != mir.Name {
					continue // a pattern never steals another mirror's topic
				}
				if lt.Mirror.Desired == metadata.DesiredPaused {
					continue // already this mirror's; only its exact name is told to resume it
				}
				if lt.Mirror.Desired == metadata.DesiredStopped {
					// Failed over: the topic is a primary now, and starting it again
					// truncates what was written since. Only its exact name does that.
					m.log.Info("mirror: a start pattern leaves a STOPPED topic alone (name it to mirror it again)", "mirror", mir.Name, "topic", n)
					continue
				}
			}
			if reason := loops[n]; reason != "" {
				m.log.Info("mirror: a start pattern leaves out a topic the source mirrors from this cluster", "mirror", mir.Name, "topic", n, "reason", reason)
				continue
			}
			seen[n] = true
			order = append(order, n)
		}
	}
	var create []string
	for _, n := range order {
		if _, done := results[n]; !done {
			if _, exists := im.Topics[n]; !exists {
				create = append(create, n)
			}
		}
	}
	var configs map[string]map[string]string
	if len(create) > 0 {
		configs = m.creationConfigs(rctx, src, cfg, create) // spec section 9: configs follow from the start
	}
	for _, n := range order {
		if _, done := results[n]; done {
			continue
		}
		if err := m.startTopic(ctx, mir.Name, meta.topics[n], configs[n]); err != nil {
			results[n] = errResult(n, err)
		} else {
			results[n] = mirrorproto.TopicResult{Name: n}
		}
	}
	for _, n := range order {
		resp.Topics = append(resp.Topics, results[n])
	}
	if len(req.IncludePatterns) > 0 || len(req.ExcludePatterns) > 0 {
		m.rememberPatterns(ctx, mir, req.IncludePatterns, req.ExcludePatterns)
	}
	m.reconcile()
	return resp
}

// rememberPatterns adds start patterns to the mirror's topics.include/topics.exclude, so
// that new matching source topics are started on later refreshes (spec section 8).
func (m *Manager) rememberPatterns(ctx context.Context, mir *metadata.Mirror, inc, exc []string) {
	raw := normalizeConfigs(mir.Configs)
	var recs []metadata.Record
	merge := func(key string, add []string) {
		cur := raw[key]
		if _, set := raw[key]; !set {
			d, _ := findDef(key)
			cur = d.def
		}
		parts := splitList(cur)
		changed := false
		for _, a := range add {
			if a = strings.TrimSpace(a); a != "" && !containsStr(parts, a) {
				parts = append(parts, a)
				changed = true
			}
		}
		if changed {
			v := strings.Join(parts, ",")
			recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceClusterMirror, ResourceName: mir.Name, Name: key, Value: &v})
		}
	}
	merge(cfgTopicsInclude, inc)
	merge(cfgTopicsExclude, exc)
	if len(recs) > 0 {
		if _, err := m.local.Metadata().Apply(ctx, recs...); err != nil {
			m.log.Warn("remember mirror topic patterns", "mirror", mir.Name, "err", err)
		}
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func compileList(ps []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, p := range ps {
		re, err := compileAnchored(p)
		if err != nil {
			return nil, err
		}
		out = append(out, re)
	}
	return out, nil
}

// topicError is a per-topic refusal with its Kafka or mirror error code.
type topicError struct {
	code int16
	msg  string
}

func (e *topicError) Error() string { return e.msg }

func newTopicError(code int16, format string, args ...any) error {
	return &topicError{code: code, msg: fmt.Sprintf(format, args...)}
}

func topicErr(name string, code int16, format string, args ...any) mirrorproto.TopicResult {
	return mirrorproto.TopicResult{Name: name, ErrorCode: code, ErrorMessage: strp(oneLine(fmt.Sprintf(format, args...)))}
}

func errResult(name string, err error) mirrorproto.TopicResult {
	var te *topicError
	if errors.As(err, &te) {
		return topicErr(name, te.code, "%s", te.msg)
	}
	return topicErr(name, kerr.UnknownServerError.Code, "%v", err)
}

// startTopic makes the destination topic a MIRRORING mirror topic of mirror: created with
// the source topic ID, partition count and configs (the source's synced configs, may be
// nil), or taken over when it exists with the same topic ID (failback), or restarted when
// it is a STOPPED topic of this mirror.
func (m *Manager) startTopic(ctx context.Context, mirror string, st *sourceTopic, configs map[string]string) error {
	im := m.local.Metadata().Image()
	n := int32(len(st.partitions))
	want := &metadata.MirrorTopic{MirrorName: mirror, Desired: metadata.DesiredMirroring, SourceTopicID: st.id}
	lt, exists := im.Topics[st.name]
	noSourceID := st.id == (metadata.TopicID{}) // Apache Kafka before 2.8: no topic IDs
	if !exists {
		id := st.id
		if noSourceID {
			id = metadata.NewTopicID() // the destination's own, as Kafka 2.8+ gives a topic that had none
		}
		if err := m.local.CreateTopic(ctx, st.name, id, n, configs, want); err != nil {
			if lt2, ok := m.local.Metadata().Image().Topics[st.name]; ok && lt2.ID != id {
				return newTopicError(kerr.TopicAlreadyExists.Code, "topic %s exists on the destination with topic ID %s, but the source topic ID is %s",
					st.name, topicIDString(lt2.ID), topicIDString(st.id))
			}
			return fmt.Errorf("create mirror topic %s: %w", st.name, err)
		}
		lt, _ = m.local.Metadata().Image().Topics[st.name]
	} else {
		switch {
		case lt.Mirror != nil && lt.Mirror.MirrorName != mirror:
			return newTopicError(mirrorproto.TopicAlreadyInClusterMirror, "topic %s is already a mirror topic of cluster mirror %s", st.name, lt.Mirror.MirrorName)
		case noSourceID && (lt.Mirror == nil || lt.Mirror.SourceTopicID != st.id):
			// only the name identifies the source topic: a topic of this mirror that was
			// mirrored from a topic without ID is the same one, any other is refused
			return newTopicError(kerr.TopicAlreadyExists.Code, "topic %s exists on the destination and the source topic has no topic ID (Apache Kafka before 2.8) to tell whether it is the same; delete or rename it first",
				st.name)
		case !noSourceID && lt.ID != st.id:
			return newTopicError(kerr.TopicAlreadyExists.Code, "topic %s exists on the destination with topic ID %s, but the source topic ID is %s; delete or rename it first",
				st.name, topicIDString(lt.ID), topicIDString(st.id))
		case lt.Partitions != n:
			return newTopicError(kerr.InvalidPartitions.Code, "topic %s has %d partitions on the destination and %d on the source", st.name, lt.Partitions, n)
		}
	}
	if lt != nil && lt.Mirror != nil && lt.Mirror.MirrorName == mirror {
		switch lt.Mirror.Desired {
		case metadata.DesiredMirroring:
			return nil // already started
		case metadata.DesiredPaused:
			return newTopicError(mirrorproto.MirrorTopicAlreadyPaused, "topic %s is paused in mirror %s; --resume continues it from its log end offset", st.name, mirror)
		}
		for _, p := range m.topicPartitions(st.name) {
			if p.state() == mirrorproto.StateStopping {
				return newTopicError(mirrorproto.MirrorTopicBeingStopped, "topic %s is being stopped", st.name)
			}
		}
	}
	if _, err := m.local.Metadata().Apply(ctx, metadata.MirrorTopicRecord{Topic: st.name, Mirror: want}); err != nil {
		return fmt.Errorf("record the desired state of %s: %w", st.name, err)
	}
	m.log.Info("mirror topic started", "mirror", mirror, "topic", st.name, "partitions", n)
	return nil
}

// resolveMirrorTopics resolves names (which must be topics of mirror) and anchored
// patterns against the mirror's topics. Unknown names get TOPIC_NOT_IN_CLUSTER_MIRROR.
func resolveMirrorTopics(im *metadata.Image, mirror string, names []string, patterns []string) ([]string, map[string]mirrorproto.TopicResult, error) {
	res, err := compileList(patterns)
	if err != nil {
		return nil, nil, err
	}
	var order []string
	seen := map[string]bool{}
	bad := map[string]mirrorproto.TopicResult{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		order = append(order, n)
		t := im.Topics[n]
		if t == nil || t.Mirror == nil || t.Mirror.MirrorName != mirror {
			bad[n] = topicErr(n, mirrorproto.TopicNotInClusterMirror, "topic %s is not a mirror topic of cluster mirror %s", n, mirror)
		}
	}
	if len(res) > 0 {
		for _, t := range im.MirrorTopics(mirror) {
			if !seen[t.Name] && matchAny(res, t.Name) {
				seen[t.Name] = true
				order = append(order, t.Name)
			}
		}
	}
	return order, bad, nil
}

func topicNames(ts []mirrorproto.TopicName) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.TopicName)
	}
	return out
}

// StopMirrorTopics runs failover (spec section 5, key 1096) for the named topics and the
// mirror's topics matching Patterns. It returns when every partition is STOPPED, so the
// topics accept writes when it answers. Per-topic errors: TOPIC_NOT_IN_CLUSTER_MIRROR;
// top level: UNKNOWN_CLUSTER_MIRROR, INVALID_REQUEST, INVALID_CLUSTER_MIRROR_STATES.
func (m *Manager) StopMirrorTopics(ctx context.Context, req *mirrorproto.StopMirrorTopicsRequest) *mirrorproto.StopMirrorTopicsResponse {
	resp := &mirrorproto.StopMirrorTopicsResponse{Versioned: req.Versioned}
	fail := func(code int16, format string, args ...any) *mirrorproto.StopMirrorTopicsResponse {
		resp.ErrorCode = code
		resp.ErrorMessage = strp(oneLine(fmt.Sprintf(format, args...)))
		return resp
	}
	im, mir, merr := m.mirrorAt(ctx, req.MirrorName, req.StateValidationOffset)
	if merr != nil {
		return fail(merr.Code, "%s", merr.Message)
	}
	order, bad, err := resolveMirrorTopics(im, mir.Name, topicNames(req.Topics), req.Patterns)
	if err != nil {
		return fail(kerr.InvalidRequest.Code, "%v", err)
	}
	var recs []metadata.Record
	for _, n := range order {
		if _, b := bad[n]; b {
			continue
		}
		t := im.Topics[n]
		if t.Mirror.Desired != metadata.DesiredStopped {
			mt := *t.Mirror
			mt.Desired = metadata.DesiredStopped
			recs = append(recs, metadata.MirrorTopicRecord{Topic: n, Mirror: &mt})
		}
	}
	if _, err := m.local.Metadata().Apply(ctx, recs...); err != nil {
		return fail(kerr.UnknownServerError.Code, "record the desired states: %v", err)
	}
	m.reconcile()
	for _, n := range order {
		if r, b := bad[n]; b {
			resp.Topics = append(resp.Topics, r)
			continue
		}
		// A local failover that fails (the ISR below min.insync.replicas, markers not
		// replicated in time, the leadership moving) is resumed by the runner, here or on
		// the new leader (the desired state stays stopped): the answer waits for every
		// partition to be STOPPED and names the errors only if some is not in time.
		// The partitions fail over in parallel: each may wait up to 30 s for its ISR.
		failed := map[int32]string{}
		var fmu sync.Mutex
		var wg sync.WaitGroup
		for _, p := range m.topicPartitions(n) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.failover(mir.SourceClusterID); err != nil {
					fmu.Lock()
					failed[p.index] = err.Error()
					fmu.Unlock()
					m.log.Warn("mirror failover: retrying", "mirror", mir.Name, "partition", p.String(), "err", err)
				}
			}()
		}
		wg.Wait()
		if r := m.runner(mir.Name); len(failed) > 0 && r != nil {
			r.kick()
		}
		wctx, cancel := context.WithTimeout(ctx, stopWait)
		errs := m.awaitStopped(wctx, im.Topics[n])
		cancel()
		for i := range errs {
			var idx int32
			if _, err := fmt.Sscanf(errs[i], "partition %d:", &idx); err == nil && failed[idx] != "" {
				errs[i] += ": " + failed[idx]
			}
		}
		if len(errs) > 0 {
			resp.Topics = append(resp.Topics, topicErr(n, kerr.UnknownServerError.Code, "failover of %s: %s", n, strings.Join(errs, "; ")))
			continue
		}
		m.log.Info("mirror topic stopped (failover done)", "mirror", mir.Name, "topic", n)
		resp.Topics = append(resp.Topics, mirrorproto.TopicResult{Name: n})
	}
	if r := m.runner(mir.Name); r != nil {
		r.kick()
	}
	return resp
}

// stopWait bounds how long StopMirrorTopics waits for the partitions other brokers lead
// to finish their failover (below the clients' request timeout).
const stopWait = 25 * time.Second

// awaitStopped waits until every partition of t is STOPPED, wherever it is led: the
// failover of the partitions other brokers lead runs there, once they see the desired
// state. It returns the partitions still not STOPPED when ctx ends (their leaders finish
// the failover when they can: the desired state stays STOPPED).
func (m *Manager) awaitStopped(ctx context.Context, t *metadata.Topic) []string {
	for {
		var pending []string
		for i, st := range m.clusterStates(ctx, t) {
			if st != mirrorproto.StateStopped {
				pending = append(pending, fmt.Sprintf("partition %d: %s (failover not finished on its leader)", i, st))
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return pending
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// topicStates returns the states of topic's partitions, wherever they are led
// (clusterStates).
func (m *Manager) topicStates(topic string) []mirrorproto.State {
	t := m.local.Metadata().Image().Topics[topic]
	if t == nil {
		return nil
	}
	return m.clusterStates(m.ctx, t)
}

func anyState(states []mirrorproto.State, s mirrorproto.State) bool {
	for _, x := range states {
		if x == s {
			return true
		}
	}
	return false
}

// PauseMirrorTopics pauses mirror topics (spec section 4, key 1102): fetching stops, the
// topic stays read-only. Per-topic errors: TOPIC_NOT_IN_CLUSTER_MIRROR,
// MIRROR_TOPIC_ALREADY_PAUSED, MIRROR_TOPIC_BEING_STOPPED, INVALID_CLUSTER_MIRROR_STATES.
func (m *Manager) PauseMirrorTopics(ctx context.Context, req *mirrorproto.PauseMirrorTopicsRequest) *mirrorproto.PauseMirrorTopicsResponse {
	resp := &mirrorproto.PauseMirrorTopicsResponse{Versioned: req.Versioned}
	code, msg, results := m.changeDesired(ctx, req.MirrorName, topicNames(req.Topics), req.StateValidationOffset,
		metadata.DesiredPaused, func(t *metadata.Topic) error {
			states := m.topicStates(t.Name)
			switch {
			case t.Mirror.Desired == metadata.DesiredPaused:
				return newTopicError(mirrorproto.MirrorTopicAlreadyPaused, "topic %s is already paused", t.Name)
			case anyState(states, mirrorproto.StateStopping):
				return newTopicError(mirrorproto.MirrorTopicBeingStopped, "topic %s is being stopped", t.Name)
			case t.Mirror.Desired == metadata.DesiredStopped:
				return newTopicError(mirrorproto.InvalidClusterMirrorStates, "topic %s is STOPPED; only a MIRRORING topic can be paused", t.Name)
			}
			return nil
		})
	resp.ErrorCode, resp.ErrorMessage, resp.Topics = code, msg, results
	for _, r := range results {
		if r.ErrorCode != 0 {
			continue
		}
		for _, p := range m.topicPartitions(r.Name) {
			p.mu.Lock()
			if p.st.State == mirrorproto.StateMirroring {
				p.setState(mirrorproto.StatePausing, "")
				p.setState(mirrorproto.StatePaused, "")
			}
			p.mu.Unlock()
		}
	}
	return resp
}

// ResumeMirrorTopics resumes paused mirror topics (spec section 4, key 1103): mirroring
// continues from the local LEO without truncation. Per-topic errors:
// TOPIC_NOT_IN_CLUSTER_MIRROR, MIRROR_TOPIC_NOT_PAUSED, MIRROR_TOPIC_BEING_STOPPED.
func (m *Manager) ResumeMirrorTopics(ctx context.Context, req *mirrorproto.ResumeMirrorTopicsRequest) *mirrorproto.ResumeMirrorTopicsResponse {
	resp := &mirrorproto.ResumeMirrorTopicsResponse{Versioned: req.Versioned}
	code, msg, results := m.changeDesired(ctx, req.MirrorName, topicNames(req.Topics), req.StateValidationOffset,
		metadata.DesiredMirroring, func(t *metadata.Topic) error {
			if anyState(m.topicStates(t.Name), mirrorproto.StateStopping) {
				return newTopicError(mirrorproto.MirrorTopicBeingStopped, "topic %s is being stopped", t.Name)
			}
			if t.Mirror.Desired != metadata.DesiredPaused {
				return newTopicError(mirrorproto.MirrorTopicNotPaused, "topic %s is not paused (%s)", t.Name, t.Mirror.Desired)
			}
			return nil
		})
	resp.ErrorCode, resp.ErrorMessage, resp.Topics = code, msg, results
	for _, r := range results {
		if r.ErrorCode != 0 {
			continue
		}
		for _, p := range m.topicPartitions(r.Name) {
			p.mu.Lock()
			if p.st.State == mirrorproto.StatePaused {
				p.setState(mirrorproto.StateMirroring, "")
			}
			p.mu.Unlock()
		}
	}
	if r := m.runner(req.MirrorName); r != nil {
		r.kick()
	}
	return resp
}

// changeDesired is the common part of pause and resume: resolve topics, check each with
// check, record the new desired state.
func (m *Manager) changeDesired(ctx context.Context, mirror string, names []string, svo int64, desired metadata.DesiredState,
	check func(*metadata.Topic) error) (int16, *string, []mirrorproto.TopicResult) {
	im, mir, merr := m.mirrorAt(ctx, mirror, svo)
	if merr != nil {
		return merr.Code, strp(merr.Message), nil
	}
	if len(names) == 0 {
		for _, t := range im.MirrorTopics(mir.Name) {
			names = append(names, t.Name)
		}
	}
	order, bad, _ := resolveMirrorTopics(im, mir.Name, names, nil)
	results := make([]mirrorproto.TopicResult, 0, len(order))
	var recs []metadata.Record
	for _, n := range order {
		if r, b := bad[n]; b {
			results = append(results, r)
			continue
		}
		t := im.Topics[n]
		if err := check(t); err != nil {
			results = append(results, errResult(n, err))
			continue
		}
		mt := *t.Mirror
		mt.Desired = desired
		recs = append(recs, metadata.MirrorTopicRecord{Topic: n, Mirror: &mt})
		results = append(results, mirrorproto.TopicResult{Name: n})
	}
	if _, err := m.local.Metadata().Apply(ctx, recs...); err != nil {
		return kerr.UnknownServerError.Code, strp(oneLine("record the desired states: " + err.Error())), nil
	}
	m.reconcile()
	return 0, nil, results
}

// DeleteClusterMirror deletes a mirror whose topics are all STOPPED (spec section 10, key
// 1104); its partition states get tombstones in __mirror_state and its topics become
// ordinary topics. Errors: UNKNOWN_CLUSTER_MIRROR, CLUSTER_MIRROR_NOT_EMPTY,
// INVALID_CLUSTER_MIRROR_STATES.
func (m *Manager) DeleteClusterMirror(ctx context.Context, req *mirrorproto.DeleteClusterMirrorRequest) *mirrorproto.DeleteClusterMirrorResponse {
	resp := &mirrorproto.DeleteClusterMirrorResponse{Versioned: req.Versioned}
	fail := func(code int16, format string, args ...any) *mirrorproto.DeleteClusterMirrorResponse {
		resp.ErrorCode = code
		resp.ErrorMessage = strp(oneLine(fmt.Sprintf(format, args...)))
		return resp
	}
	im, mir, merr := m.mirrorAt(ctx, req.MirrorName, req.StateValidationOffset)
	if merr != nil {
		return fail(merr.Code, "%s", merr.Message)
	}
	var notStopped []string
	for _, t := range im.MirrorTopics(mir.Name) {
		ok := t.Mirror.Desired == metadata.DesiredStopped
		for _, s := range m.topicStates(t.Name) {
			ok = ok && s == mirrorproto.StateStopped
		}
		if !ok {
			notStopped = append(notStopped, t.Name)
		}
	}
	if len(notStopped) > 0 {
		return fail(mirrorproto.ClusterMirrorNotEmpty, "cluster mirror %s has topics that are not STOPPED: %s; stop them first",
			mir.Name, strings.Join(notStopped, ", "))
	}
	// tombstones for every state of this mirror
	keys := map[stateKey]bool{}
	for _, t := range im.MirrorTopics(mir.Name) {
		for i := int32(0); i < t.Partitions; i++ {
			keys[stateKey{Mirror: mir.Name, TopicID: t.ID, Partition: i}] = true
		}
	}
	recs := []metadata.Record{}
	for _, t := range im.MirrorTopics(mir.Name) {
		recs = append(recs, metadata.MirrorTopicRecord{Topic: t.Name, Mirror: nil})
	}
	recs = append(recs, metadata.RemoveMirrorRecord{Name: mir.Name})
	if _, err := m.local.Metadata().Apply(ctx, recs...); err != nil {
		return fail(kerr.UnknownServerError.Code, "delete the cluster mirror: %v", err)
	}
	m.reconcile()
	for k := range keys {
		if err := m.store.write(k, nil); err != nil {
			m.log.Error("mirror state tombstone", "mirror", mir.Name, "err", err)
		}
	}
	m.log.Info("cluster mirror deleted", "mirror", mir.Name)
	return resp
}

// RecoverMirrorTopics sends the FAILED partitions of the named topics (all of the mirror's
// topics when none is named) back to LOG_ALIGNMENT with a fresh retry budget (spec section
// 4, `--recover`, key 1106). Errors: UNKNOWN_CLUSTER_MIRROR; per topic
// TOPIC_NOT_IN_CLUSTER_MIRROR.
func (m *Manager) RecoverMirrorTopics(ctx context.Context, req *mirrorproto.RecoverMirrorTopicsRequest) *mirrorproto.RecoverMirrorTopicsResponse {
	resp := &mirrorproto.RecoverMirrorTopicsResponse{Versioned: req.Versioned}
	im, mir, merr := m.lookupMirror(ctx, req.MirrorName, -1)
	if merr != nil {
		resp.ErrorCode = merr.Code
		resp.ErrorMessage = strp(merr.Message)
		return resp
	}
	names := topicNames(req.Topics)
	if len(names) == 0 {
		for _, t := range im.MirrorTopics(mir.Name) {
			names = append(names, t.Name)
		}
	}
	order, bad, _ := resolveMirrorTopics(im, mir.Name, names, nil)
	for _, n := range order {
		if r, b := bad[n]; b {
			resp.Topics = append(resp.Topics, mirrorproto.RecoverMirrorTopicsResponseTopic{Name: n, ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage})
			continue
		}
		rt := mirrorproto.RecoverMirrorTopicsResponseTopic{Name: n}
		for _, p := range m.topicPartitions(n) {
			p.mu.Lock()
			if p.st.State == mirrorproto.StateFailed {
				p.st.RetryAttempt = 0
				p.nextRetry = time.Time{}
				if p.setState(mirrorproto.StateLogAlignment, "") {
					rt.Partitions = append(rt.Partitions, p.index)
				}
			}
			p.mu.Unlock()
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if r := m.runner(mir.Name); r != nil {
		r.kick()
	}
	if !req.LeadersOnly {
		m.recoverOthers(ctx, im, req, resp)
	}
	return resp
}

// recoverOthers forwards a recovery to every other alive broker, for the partitions they
// lead, and adds the partitions they recovered to resp.
func (m *Manager) recoverOthers(ctx context.Context, im *metadata.Image, req *mirrorproto.RecoverMirrorTopicsRequest, resp *mirrorproto.RecoverMirrorTopicsResponse) {
	for _, id := range im.BrokerIDs() {
		if b := im.Brokers[id]; id == m.local.NodeID() || b.Fenced {
			continue
		}
		fwd := *req
		fwd.LeadersOnly = true
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := m.local.BrokerRequest(rctx, id, &fwd)
		cancel()
		if err != nil {
			m.log.Warn("recover: a broker did not answer; its FAILED partitions stay as they are", "broker", id, "err", err)
			continue
		}
		for _, rt := range r.(*mirrorproto.RecoverMirrorTopicsResponse).Topics {
			for i := range resp.Topics {
				if resp.Topics[i].Name == rt.Name && resp.Topics[i].ErrorCode == 0 {
					resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rt.Partitions...)
					slices.Sort(resp.Topics[i].Partitions)
				}
			}
		}
	}
}

// ListClusterMirrors lists the mirrors (spec section 10, key 1098).
func (m *Manager) ListClusterMirrors(_ context.Context, req *mirrorproto.ListClusterMirrorsRequest) *mirrorproto.ListClusterMirrorsResponse {
	resp := &mirrorproto.ListClusterMirrorsResponse{Versioned: req.Versioned}
	im := m.local.Metadata().Image()
	names := make([]string, 0, len(im.Mirrors))
	for n := range im.Mirrors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		mir := im.Mirrors[n]
		topics := im.MirrorTopics(n)
		lm := mirrorproto.ListClusterMirrorsResponseMirror{
			MirrorName: n, SourceBootstrap: normalizeConfigs(mir.Configs)[cfgBootstrap],
			SourceClusterID: mir.SourceClusterID, TopicCount: int32(len(topics)),
		}
		if req.IncludeTopicNames {
			for _, t := range topics {
				lm.TopicNames = append(lm.TopicNames, t.Name)
			}
		}
		resp.Mirrors = append(resp.Mirrors, lm)
	}
	return resp
}

// DescribeClusterMirrors describes mirrors and their partitions (spec sections 10 and 13,
// key 1099): per partition the source HW of the latest fetch, the LEO, the lag, the
// state, the retry attempt, the error, the last mirror position and the truncation and
// skip reports. Each broker knows the partitions it leads: the broker asked collects the
// others from every other broker (LeadersOnly), and a partition no broker leads now is
// described from its persisted state. With ClusterID and LastMirrorEpochLookups it also
// answers the failback lookup of LOG_ALIGNMENT: the last mirror position recorded for
// those topic IDs by this cluster's mirrors whose source is that cluster.
func (m *Manager) DescribeClusterMirrors(ctx context.Context, req *mirrorproto.DescribeClusterMirrorsRequest) *mirrorproto.DescribeClusterMirrorsResponse {
	resp := mirrorproto.NewDescribeClusterMirrorsResponse()
	resp.Versioned = req.Versioned
	resp.MaxRetryAttempts = m.config().RetryMaxAttempts
	names := req.MirrorNames
	im := m.image(ctx, func(im *metadata.Image) bool {
		for _, n := range names {
			if im.Mirrors[n] == nil {
				return true
			}
		}
		return false
	})
	if len(names) == 0 {
		for n := range im.Mirrors {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	var remote []*mirrorproto.DescribeClusterMirrorsResponse
	if !req.LeadersOnly {
		remote = m.describeOthers(ctx, im, names)
	}
	for _, n := range names {
		mir, ok := im.Mirrors[n]
		if !ok {
			resp.Mirrors = append(resp.Mirrors, mirrorproto.DescribeClusterMirrorsResponseMirror{
				ErrorCode: mirrorproto.UnknownClusterMirror, MirrorName: n,
				ErrorMessage: strp(fmt.Sprintf("cluster mirror %s does not exist", n)),
			})
			continue
		}
		dm := mirrorproto.DescribeClusterMirrorsResponseMirror{
			MirrorName: n, SourceBootstrap: normalizeConfigs(mir.Configs)[cfgBootstrap], SourceClusterID: mir.SourceClusterID,
		}
		if r := m.runner(n); r != nil {
			dm.SyncTasks = r.status.snapshot()
		}
		for _, t := range im.MirrorTopics(n) {
			dt := mirrorproto.DescribeClusterMirrorsResponseTopic{TopicName: t.Name, TopicID: t.ID}
			for i := int32(0); i < t.Partitions; i++ {
				if p := m.partitionOf(t.Name, i); p != nil && p.topicID == t.ID {
					dt.Partitions = append(dt.Partitions, p.describe())
				} else if req.LeadersOnly {
					continue
				} else if d, ok := remotePartition(remote, n, t, i); ok {
					dt.Partitions = append(dt.Partitions, d)
				} else {
					dt.Partitions = append(dt.Partitions, m.describePersisted(ctx, n, t, i))
				}
			}
			dm.Topics = append(dm.Topics, dt)
		}
		for _, r := range remote {
			if r == nil { // that broker did not answer
				continue
			}
			for _, rm := range r.Mirrors {
				if rm.MirrorName == n {
					dm.SyncTasks = mergeSyncTasks(dm.SyncTasks, rm.SyncTasks)
				}
			}
		}
		resp.Mirrors = append(resp.Mirrors, dm)
	}
	if req.ClusterID != nil {
		for _, lk := range req.LastMirrorEpochLookups {
			resp.LookupResults = append(resp.LookupResults, m.lookupLastMirror(ctx, im, *req.ClusterID, lk))
		}
	}
	return resp
}

// describeOthers asks every other alive broker for the mirror partitions it leads; a
// broker that does not answer is left out (its partitions are described from their
// persisted states).
func (m *Manager) describeOthers(ctx context.Context, im *metadata.Image, names []string) []*mirrorproto.DescribeClusterMirrorsResponse {
	var ids []int32
	for _, id := range im.BrokerIDs() {
		if b := im.Brokers[id]; id != m.local.NodeID() && !b.Fenced {
			ids = append(ids, id)
		}
	}
	out := make([]*mirrorproto.DescribeClusterMirrorsResponse, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			resp, err := m.local.BrokerRequest(rctx, id, &mirrorproto.DescribeClusterMirrorsRequest{MirrorNames: names, LeadersOnly: true})
			if err != nil {
				m.log.Debug("describe mirrors: a broker did not answer", "broker", id, "err", err)
				return
			}
			out[i], _ = resp.(*mirrorproto.DescribeClusterMirrorsResponse)
		}()
	}
	wg.Wait()
	return out
}

// remotePartition finds partition i of mirror topic t in the other brokers' answers.
func remotePartition(remote []*mirrorproto.DescribeClusterMirrorsResponse, mirror string, t *metadata.Topic, i int32) (mirrorproto.DescribeClusterMirrorsResponsePartition, bool) {
	for _, r := range remote {
		if r == nil {
			continue
		}
		for _, rm := range r.Mirrors {
			if rm.MirrorName != mirror {
				continue
			}
			for _, rt := range rm.Topics {
				if rt.TopicName != t.Name || (rt.TopicID != (metadata.TopicID{}) && rt.TopicID != t.ID) {
					continue
				}
				for _, rp := range rt.Partitions {
					if rp.PartitionIndex == i {
						return rp, true
					}
				}
			}
		}
	}
	return mirrorproto.DescribeClusterMirrorsResponsePartition{}, false
}

// describePersisted describes a partition no alive broker leads from its persisted
// state (offsets and lag unknown).
func (m *Manager) describePersisted(ctx context.Context, mirror string, t *metadata.Topic, i int32) mirrorproto.DescribeClusterMirrorsResponsePartition {
	d := mirrorproto.DescribeClusterMirrorsResponsePartition{
		PartitionIndex: i, SourceOffset: -1, DestinationOffset: -1, Lag: -1,
		State: mirrorproto.StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1, TruncatedOffset: -1,
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := m.store.read(rctx, stateKey{Mirror: mirror, TopicID: t.ID, Partition: i})
	if err != nil || st == nil {
		return d
	}
	d.State, d.RetryAttempt = st.State, st.RetryAttempt
	d.LastMirrorEpoch, d.LastMirrorOffset = st.LastMirrorEpoch, st.LastMirrorOffset
	d.TruncatedOffset, d.TruncatedRecords, d.SkippedOffsets = st.TruncatedOffset, st.TruncatedRecords, st.SkippedOffsets
	if st.LastError != "" {
		msg := st.LastError
		d.ErrorMessage = &msg
	}
	return d
}

// mergeSyncTasks merges the sync task statuses of two brokers (the tasks run on the
// mirror's coordinator; a task that moved keeps its newest figures).
func mergeSyncTasks(a, b []mirrorproto.DescribeClusterMirrorsSyncTask) []mirrorproto.DescribeClusterMirrorsSyncTask {
	byName := map[string]int{}
	for i, t := range a {
		byName[t.Task] = i
	}
	for _, t := range b {
		i, ok := byName[t.Task]
		if !ok {
			byName[t.Task] = len(a)
			a = append(a, t)
			continue
		}
		if max(t.LastSuccessMs, t.LastErrorMs) > max(a[i].LastSuccessMs, a[i].LastErrorMs) {
			a[i] = t
		}
	}
	sort.Slice(a, func(i, j int) bool { return a[i].Task < a[j].Task })
	return a
}

// lookupLastMirror answers one failback lookup (serving side of LOG_ALIGNMENT).
func (m *Manager) lookupLastMirror(ctx context.Context, im *metadata.Image, clusterID string, lk mirrorproto.DescribeClusterMirrorsLookup) mirrorproto.DescribeClusterMirrorsLookupResult {
	res := mirrorproto.DescribeClusterMirrorsLookupResult{TopicID: lk.TopicID}
	t := im.TopicsByID[lk.TopicID]
	var mir *metadata.Mirror
	if t != nil && t.Mirror != nil {
		mir = im.Mirrors[t.Mirror.MirrorName]
	}
	for _, idx := range lk.Partitions {
		lp := mirrorproto.DescribeClusterMirrorsLookupPartition{PartitionIndex: idx, LastMirrorEpoch: -1, LastMirrorOffset: -1}
		if mir != nil && mir.SourceClusterID == clusterID {
			if p := m.partitionOf(t.Name, idx); p != nil && p.topicID == t.ID {
				p.mu.Lock()
				lp.LastMirrorEpoch, lp.LastMirrorOffset = p.st.LastMirrorEpoch, p.st.LastMirrorOffset
				p.mu.Unlock()
			} else if st, err := m.store.read(ctx, stateKey{Mirror: mir.Name, TopicID: t.ID, Partition: idx}); err == nil && st != nil {
				lp.LastMirrorEpoch, lp.LastMirrorOffset = st.LastMirrorEpoch, st.LastMirrorOffset
			}
		}
		res.Partitions = append(res.Partitions, lp)
	}
	return res
}
