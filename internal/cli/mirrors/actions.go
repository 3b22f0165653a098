package mirrorscli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/cli/clientconf"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// runner carries out one validated action.
type runner struct {
	o      *options
	action string
	out    io.Writer
	errOut io.Writer
	kopts  []kgo.Opt
	cl     *kgo.Client
	reads  readWatch
}

// readWatch is a kgo hook that notes whether a response was read and whether
// a connection closed while a request waited for its response (ApiVersions
// and SASL excluded: they are the connection's set-up, not the action).
type readWatch struct {
	answered, closed atomic.Bool
}

// OnBrokerRead implements kgo.HookBrokerRead.
func (w *readWatch) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return
	}
	if err == nil {
		w.answered.Store(true)
	} else if connClosed(err) {
		w.closed.Store(true)
	}
}

// connClosed reports whether err is the peer closing or resetting the connection.
func connClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (r *runner) run(ctx context.Context, action string, mirrorProps []clientconf.Property) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if r.o.dryRun && action != "promote" && action != "stop" {
		return r.dryRun(action, mirrorProps)
	}
	r.action = action
	cl, err := kgo.NewClient(append(r.kopts, kgo.WithHooks(&r.reads))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	r.cl = cl
	switch action {
	case "create":
		return r.create(ctx, mirrorProps)
	case "alter":
		return r.alter(ctx, mirrorProps)
	case "delete":
		return r.delete(ctx)
	case "list":
		return r.list(ctx)
	case "describe":
		if r.o.configs {
			return r.describeConfigs(ctx)
		}
		return r.describe(ctx)
	case "start":
		return r.start(ctx)
	case "stop":
		return r.stop(ctx)
	case "promote":
		return r.promote(ctx)
	case "pause", "resume":
		return r.pauseResume(ctx, action)
	case "recover":
		return r.recover(ctx)
	}
	return fmt.Errorf("unknown action %q", action)
}

// request sends req and returns its response; a transport failure becomes a
// one-line error naming the bootstrap server.
func (r *runner) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, actionTimeout)
	defer cancel()
	resp, err := r.cl.Request(ctx, req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer from %s within %s", r.o.bootstrap, actionTimeout)
		}
		if strings.Contains(err.Error(), "broker is too old") {
			return nil, fmt.Errorf("%s does not serve the Cluster Mirroring RPCs (API key %d): is it a kmirror broker?", r.o.bootstrap, req.Key())
		}
		if r.reads.closed.Load() && !r.saslPlausible(ctx, err) {
			return nil, r.closedDuringRequest(req)
		}
		return nil, fmt.Errorf("cannot reach %s: %v", r.o.bootstrap, err)
	}
	return resp, nil
}

// saslPlausible reports whether franz-go's "is SASL missing?" hint may be true:
// err says the broker closed the connection right after the first request that
// followed ApiVersions (franz-go only says so without SASL configured), no
// response was read on this client before, and a fresh connection's Metadata
// request is closed the same way (a broker that requires SASL does that;
// one that stopped refuses the connection, one that restarted answers).
func (r *runner) saslPlausible(ctx context.Context, err error) bool {
	var first *kgo.ErrFirstReadEOF
	if !errors.As(err, &first) || !strings.Contains(err.Error(), "SASL") || r.reads.answered.Load() {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	probe, perr := kgo.NewClient(r.kopts...)
	if perr != nil {
		return false
	}
	defer probe.Close()
	_, perr = probe.Request(ctx, kmsg.NewPtrMetadataRequest())
	return errors.As(perr, &first) && strings.Contains(perr.Error(), "SASL")
}

// closedDuringRequest is the error for a connection closed while req waited for
// its response after the connection had worked: the broker may have stopped or
// restarted, and a change may or may not have been applied.
func (r *runner) closedDuringRequest(req kmsg.Request) error {
	msg := fmt.Sprintf("%s closed the connection during the request (the broker may have stopped or restarted)", r.o.bootstrap)
	switch req.(type) {
	case *kmsg.DescribeConfigsRequest, *kmsg.MetadataRequest, *mirrorproto.DescribeClusterMirrorsRequest, *mirrorproto.ListClusterMirrorsRequest:
		return fmt.Errorf("%s; nothing was changed: try again", msg)
	}
	return fmt.Errorf("%s: the --%s may or may not have been applied; check with --describe", msg, r.action)
}

func (r *runner) dryRun(action string, mirrorProps []clientconf.Property) error {
	o := r.o
	names, patterns := splitTopics(o.topics)
	w := r.out
	fmt.Fprintf(w, "Dry run: nothing is sent to %s.\n", o.bootstrap)
	switch action {
	case "create":
		var keys []string
		for _, p := range mirrorProps {
			keys = append(keys, p.Key)
		}
		fmt.Fprintf(w, "Would send CreateClusterMirror: mirror %s, configs %s.\n", o.mirror, strings.Join(keys, ", "))
	case "alter":
		var keys []string
		for _, p := range mirrorProps {
			keys = append(keys, p.Key)
		}
		fmt.Fprintf(w, "Would send IncrementalAlterConfigs on CLUSTER_MIRROR %s: set [%s], delete [%s].\n",
			o.mirror, strings.Join(keys, ","), strings.Join(nonEmpty(o.deleteConfig), ","))
	case "delete":
		fmt.Fprintf(w, "Would send DeleteClusterMirror: mirror %s.\n", o.mirror)
	case "list":
		fmt.Fprintln(w, "Would send ListClusterMirrors.")
	case "describe":
		if o.configs {
			fmt.Fprintf(w, "Would send DescribeConfigs on CLUSTER_MIRROR %s.\n", o.mirror)
			break
		}
		fmt.Fprintf(w, "Would send DescribeClusterMirrors: mirrors %s.\n", orAll(o.mirror))
	case "start":
		fmt.Fprintf(w, "Would send StartMirrorTopics: mirror %s, topics [%s], include patterns [%s], exclude patterns [%s].\n",
			o.mirror, strings.Join(names, ","), strings.Join(patterns, ","), strings.Join(nonEmpty(o.exclude), ","))
	case "stop":
		fmt.Fprintf(w, "Would send StopMirrorTopics: mirror %s, topics [%s], patterns [%s].\n",
			o.mirror, strings.Join(names, ","), strings.Join(patterns, ","))
	default:
		rpc := map[string]string{"pause": "PauseMirrorTopics", "resume": "ResumeMirrorTopics", "recover": "RecoverMirrorTopics"}[action]
		fmt.Fprintf(w, "Would send %s: mirror %s, topics [%s]", rpc, o.mirror, strings.Join(names, ","))
		if len(patterns) > 0 {
			fmt.Fprintf(w, " plus the mirror's topics matching [%s] (from DescribeClusterMirrors)", strings.Join(patterns, ","))
		}
		fmt.Fprintln(w, ".")
	}
	return nil
}

func orAll(mirror string) string {
	if mirror == "" {
		return "all"
	}
	return mirror
}

func (r *runner) create(ctx context.Context, props []clientconf.Property) error {
	req := &mirrorproto.CreateClusterMirrorRequest{MirrorName: r.o.mirror}
	for _, p := range props {
		req.Config = append(req.Config, mirrorproto.CreateClusterMirrorRequestConfig{Name: p.Key, Value: p.Value})
	}
	resp, err := r.request(ctx, req)
	if err != nil {
		return err
	}
	cr := resp.(*mirrorproto.CreateClusterMirrorResponse)
	if err := mirrorproto.ErrorFor(cr.ErrorCode, cr.ErrorMessage); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "Created cluster mirror %s.\n", r.o.mirror)
	return nil
}

func (r *runner) delete(ctx context.Context) error {
	req := mirrorproto.NewDeleteClusterMirrorRequest()
	req.MirrorName = r.o.mirror
	resp, err := r.request(ctx, req)
	if err != nil {
		return err
	}
	dr := resp.(*mirrorproto.DeleteClusterMirrorResponse)
	if err := mirrorproto.ErrorFor(dr.ErrorCode, dr.ErrorMessage); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "Deleted cluster mirror %s.\n", r.o.mirror)
	return nil
}

func (r *runner) list(ctx context.Context) error {
	resp, err := r.request(ctx, &mirrorproto.ListClusterMirrorsRequest{IncludeTopicNames: r.o.json})
	if err != nil {
		return err
	}
	lr := resp.(*mirrorproto.ListClusterMirrorsResponse)
	if err := mirrorproto.ErrorFor(lr.ErrorCode, lr.ErrorMessage); err != nil {
		return err
	}
	return printList(r.out, lr.Mirrors, r.o.json)
}

// describeMirrors sends DescribeClusterMirrors for names (empty = all) and
// fails on a top-level or per-mirror error.
func (r *runner) describeMirrors(ctx context.Context, names []string) (*mirrorproto.DescribeClusterMirrorsResponse, error) {
	resp, err := r.request(ctx, &mirrorproto.DescribeClusterMirrorsRequest{MirrorNames: names})
	if err != nil {
		return nil, err
	}
	dr := resp.(*mirrorproto.DescribeClusterMirrorsResponse)
	if err := mirrorproto.ErrorFor(dr.ErrorCode, dr.ErrorMessage); err != nil {
		return nil, err
	}
	for _, m := range dr.Mirrors {
		if m.ErrorCode != 0 {
			msg := m.ErrorMessage
			if msg == nil {
				s := "mirror " + m.MirrorName
				msg = &s
			}
			return nil, mirrorproto.ErrorFor(m.ErrorCode, msg)
		}
	}
	return dr, nil
}

func (r *runner) describe(ctx context.Context) error {
	var names []string
	if r.o.mirror != "" {
		names = []string{r.o.mirror}
	}
	dr, err := r.describeMirrors(ctx, names)
	if err != nil {
		return err
	}
	if r.o.failed {
		return printFailed(r.out, dr, r.o.json)
	}
	return printDescribe(r.out, dr, r.o.json)
}

func (r *runner) start(ctx context.Context) error {
	names, patterns := splitTopics(r.o.topics)
	req := mirrorproto.NewStartMirrorTopicsRequest()
	req.MirrorName = r.o.mirror
	for _, n := range names {
		req.Topics = append(req.Topics, mirrorproto.StartMirrorTopicsRequestTopic{TopicName: n})
	}
	if len(patterns) > 0 {
		req.IncludePatterns = patterns
	}
	if ex := nonEmpty(r.o.exclude); len(ex) > 0 {
		req.ExcludePatterns = ex
	}
	resp, err := r.request(ctx, req)
	if err != nil {
		return err
	}
	sr := resp.(*mirrorproto.StartMirrorTopicsResponse)
	if sr.ErrorCode == 0 && len(sr.Topics) == 0 && len(patterns) > 0 {
		// The server keeps start patterns in topics.include for topic discovery (spec
		// section 8): say so, or a later matching topic looks like a surprise.
		what, it := "the pattern "+patterns[0]+" is kept", "it"
		if len(patterns) > 1 {
			what, it = "the patterns "+strings.Join(patterns, ", ")+" are kept", "them"
		}
		// Patterns also leave out the mirror's paused and stopped topics and loops (the
		// server's StartMirrorTopics): "matched nothing" would not be the whole truth.
		fmt.Fprintf(r.out, "No topic started in mirror %s (patterns leave out its paused and stopped topics, and topics the source mirrors from this cluster; name a stopped topic to mirror it again); %s: new source topics that match %s will be mirrored by %s.\n",
			r.o.mirror, what, it, r.o.mirror)
		return nil
	}
	return r.topicResults(sr.ErrorCode, sr.ErrorMessage, sr.Topics, "Started mirroring")
}

func (r *runner) stop(ctx context.Context) error {
	if r.o.dryRun {
		return r.stopDryRun(ctx)
	}
	names, patterns := splitTopics(r.o.topics)
	req := mirrorproto.NewStopMirrorTopicsRequest()
	req.MirrorName = r.o.mirror
	for _, n := range names {
		req.Topics = append(req.Topics, mirrorproto.TopicName{TopicName: n})
	}
	if len(patterns) > 0 {
		req.Patterns = patterns
	}
	resp, err := r.request(ctx, req)
	if err != nil {
		return err
	}
	sr := resp.(*mirrorproto.StopMirrorTopicsResponse)
	return r.topicResults(sr.ErrorCode, sr.ErrorMessage, sr.Topics, "Stopped mirroring")
}

// expandTopics returns the plain names of --topics plus the mirror's topics
// (from DescribeClusterMirrors) that match a regex element in full, as
// Java's Pattern.matches does.
func (r *runner) expandTopics(ctx context.Context) ([]mirrorproto.TopicName, error) {
	names, patterns := splitTopics(r.o.topics)
	seen := map[string]bool{}
	var out []mirrorproto.TopicName
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, mirrorproto.TopicName{TopicName: n})
		}
	}
	for _, n := range names {
		add(n)
	}
	if len(patterns) == 0 {
		return out, nil
	}
	dr, err := r.describeMirrors(ctx, []string{r.o.mirror})
	if err != nil {
		return nil, err
	}
	var res []*regexp.Regexp
	for _, p := range patterns {
		res = append(res, regexp.MustCompile(`^(?:`+p+`)$`)) // validated earlier
	}
	var topics []string
	for _, m := range dr.Mirrors {
		for _, t := range m.Topics {
			topics = append(topics, t.TopicName)
		}
	}
	sort.Strings(topics)
	for _, t := range topics {
		for _, re := range res {
			if re.MatchString(t) {
				add(t)
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no topic of mirror %s matches %s", r.o.mirror, strings.Join(patterns, ","))
	}
	return out, nil
}

func (r *runner) pauseResume(ctx context.Context, action string) error {
	topics, err := r.expandTopics(ctx)
	if err != nil {
		return err
	}
	var req kmsg.Request
	if action == "pause" {
		p := mirrorproto.NewPauseMirrorTopicsRequest()
		p.MirrorName, p.Topics = r.o.mirror, topics
		req = p
	} else {
		p := mirrorproto.NewResumeMirrorTopicsRequest()
		p.MirrorName, p.Topics = r.o.mirror, topics
		req = p
	}
	resp, err := r.request(ctx, req)
	if err != nil {
		return err
	}
	switch pr := resp.(type) {
	case *mirrorproto.PauseMirrorTopicsResponse:
		return r.topicResults(pr.ErrorCode, pr.ErrorMessage, pr.Topics, "Paused mirroring")
	case *mirrorproto.ResumeMirrorTopicsResponse:
		return r.topicResults(pr.ErrorCode, pr.ErrorMessage, pr.Topics, "Resumed mirroring")
	}
	return fmt.Errorf("unexpected response %T", resp)
}

func (r *runner) recover(ctx context.Context) error {
	topics, err := r.expandTopics(ctx)
	if err != nil {
		return err
	}
	resp, err := r.request(ctx, &mirrorproto.RecoverMirrorTopicsRequest{MirrorName: r.o.mirror, Topics: topics})
	if err != nil {
		return err
	}
	rr := resp.(*mirrorproto.RecoverMirrorTopicsResponse)
	if err := mirrorproto.ErrorFor(rr.ErrorCode, rr.ErrorMessage); err != nil {
		return err
	}
	var failures []string
	for _, t := range rr.Topics {
		if t.ErrorCode != 0 {
			failures = append(failures, topicFailure(t.Name, t.ErrorCode, t.ErrorMessage))
			continue
		}
		if len(t.Partitions) == 0 {
			fmt.Fprintf(r.out, "Topic %s of mirror %s has no FAILED partition.\n", t.Name, r.o.mirror)
			continue
		}
		parts := make([]string, len(t.Partitions))
		for i, p := range t.Partitions {
			parts[i] = fmt.Sprint(p)
		}
		fmt.Fprintf(r.out, "Recovering partitions %s of topic %s in mirror %s.\n", strings.Join(parts, ","), t.Name, r.o.mirror)
	}
	return r.failures(failures)
}

// topicResults prints one line per successful topic and fails with the
// topic errors, one `Error:` line each (the last one returned).
func (r *runner) topicResults(code int16, msg *string, topics []mirrorproto.TopicResult, verb string) error {
	if err := mirrorproto.ErrorFor(code, msg); err != nil {
		return err
	}
	if len(topics) == 0 {
		fmt.Fprintf(r.out, "No topic matched in mirror %s.\n", r.o.mirror)
		return nil
	}
	var failures []string
	for _, t := range topics {
		if t.ErrorCode != 0 {
			failures = append(failures, topicFailure(t.Name, t.ErrorCode, t.ErrorMessage))
			continue
		}
		fmt.Fprintf(r.out, "%s topic %s in mirror %s.\n", verb, t.Name, r.o.mirror)
	}
	return r.failures(failures)
}

func topicFailure(topic string, code int16, msg *string) string {
	s := mirrorproto.Name(code) + ": topic " + topic
	if msg != nil && *msg != "" {
		s += ": " + *msg
	}
	return s
}

// failures prints all but the last failure as `Error:` lines and returns
// the last, which the caller prints the same way.
func (r *runner) failures(f []string) error {
	if len(f) == 0 {
		return nil
	}
	for _, s := range f[:len(f)-1] {
		fmt.Fprintf(r.errOut, "Error: %s\n", s)
	}
	return errors.New(f[len(f)-1])
}
