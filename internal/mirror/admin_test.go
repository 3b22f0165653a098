package mirror

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// TestAdminErrors covers the refusals of the mirror RPCs (spec section 10), each with a
// one-line message.
func TestAdminErrors(t *testing.T) {
	c, _ := newKfake(t, kfake.SeedTopics(1, "t1", "t2", "__internal"))
	addrs := c.ListenAddrs()
	e := newEnv(t)
	ctx := context.Background()
	create := func(name string, cfg ...string) *mirrorproto.CreateClusterMirrorResponse {
		req := &mirrorproto.CreateClusterMirrorRequest{MirrorName: name}
		for i := 0; i+1 < len(cfg); i += 2 {
			req.Config = append(req.Config, mirrorproto.CreateClusterMirrorRequestConfig{Name: cfg[i], Value: cfg[i+1]})
		}
		return e.m.CreateClusterMirror(ctx, req)
	}
	expect := func(what string, code int16, msg *string, want int16, contains string) {
		t.Helper()
		if code != want || msg == nil || !strings.Contains(*msg, contains) || strings.Contains(*msg, "\n") {
			t.Fatalf("%s: got %s %v, want %s containing %q", what, mirrorproto.Name(code), strOf(msg), mirrorproto.Name(want), contains)
		}
	}
	r := create("m1", "mirror.bootstrap.servers", addrs[0]) // the first draft's alias
	if r.ErrorCode != 0 {
		t.Fatalf("create: %v", strOf(r.ErrorMessage))
	}
	r = create("m1", "bootstrap.servers", addrs[0])
	expect("duplicate", r.ErrorCode, r.ErrorMessage, mirrorproto.ClusterMirrorAlreadyExists, "m1")
	r = create("m2")
	expect("no bootstrap", r.ErrorCode, r.ErrorMessage, kerr.InvalidConfig.Code, "bootstrap.servers is required")
	r = create("m3", "bootstrap.servers", "127.0.0.1:1", "request.timeout.ms", "500")
	expect("unreachable", r.ErrorCode, r.ErrorMessage, kerr.NetworkException.Code, "cannot reach the source cluster at 127.0.0.1:1")
	r = create("m4", "bootstrap.servers", addrs[0], "source.cluster.id", "not-it")
	expect("wrong cluster ID", r.ErrorCode, r.ErrorMessage, kerr.InvalidConfig.Code, "does not match")

	sreq := mirrorproto.NewStartMirrorTopicsRequest()
	sreq.MirrorName = "nope"
	sr := e.m.StartMirrorTopics(ctx, sreq)
	expect("unknown mirror", sr.ErrorCode, sr.ErrorMessage, mirrorproto.UnknownClusterMirror, "nope")
	sreq.MirrorName = "m1"
	sreq.IncludePatterns = []string{"("}
	sr = e.m.StartMirrorTopics(ctx, sreq)
	expect("bad regex", sr.ErrorCode, sr.ErrorMessage, kerr.InvalidRequest.Code, "invalid regex")

	// a local topic with the same name and another topic ID is refused
	if _, err := e.local.Metadata().Apply(ctx, metadata.TopicRecord{Name: "t2", ID: metadata.NewTopicID(), Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	sreq.IncludePatterns = nil
	sreq.Topics = []mirrorproto.StartMirrorTopicsRequestTopic{{TopicName: "t1"}, {TopicName: "t2"}, {TopicName: "missing"}, {TopicName: "__internal"}}
	sr = e.m.StartMirrorTopics(ctx, sreq)
	if sr.ErrorCode != 0 || len(sr.Topics) != 4 {
		t.Fatalf("start: %+v", sr)
	}
	expect("t1", sr.Topics[0].ErrorCode, strp("ok"), 0, "ok")
	expect("other topic ID", sr.Topics[1].ErrorCode, sr.Topics[1].ErrorMessage, kerr.TopicAlreadyExists.Code, "topic ID")
	expect("missing", sr.Topics[2].ErrorCode, sr.Topics[2].ErrorMessage, kerr.UnknownTopicOrPartition.Code, "does not exist on the source")
	expect("internal", sr.Topics[3].ErrorCode, sr.Topics[3].ErrorMessage, kerr.InvalidRequest.Code, "excluded")

	// t1 belongs to m1: another mirror cannot take it
	if r := create("other", "bootstrap.servers", addrs[0]); r.ErrorCode != 0 {
		t.Fatal(strOf(r.ErrorMessage))
	}
	oreq := mirrorproto.NewStartMirrorTopicsRequest()
	oreq.MirrorName = "other"
	oreq.Topics = []mirrorproto.StartMirrorTopicsRequestTopic{{TopicName: "t1"}}
	or := e.m.StartMirrorTopics(ctx, oreq)
	expect("other mirror", or.Topics[0].ErrorCode, or.Topics[0].ErrorMessage, mirrorproto.TopicAlreadyInClusterMirror, "m1")

	// resume of a topic that is not paused; stop of a topic of another mirror
	rreq := mirrorproto.NewResumeMirrorTopicsRequest()
	rreq.MirrorName, rreq.Topics = "m1", []mirrorproto.TopicName{{TopicName: "t1"}}
	rr := e.m.ResumeMirrorTopics(ctx, rreq)
	expect("resume", rr.Topics[0].ErrorCode, rr.Topics[0].ErrorMessage, mirrorproto.MirrorTopicNotPaused, "not paused")
	stop := mirrorproto.NewStopMirrorTopicsRequest()
	stop.MirrorName, stop.Topics = "other", []mirrorproto.TopicName{{TopicName: "t1"}}
	st := e.m.StopMirrorTopics(ctx, stop)
	expect("stop other", st.Topics[0].ErrorCode, st.Topics[0].ErrorMessage, mirrorproto.TopicNotInClusterMirror, "not a mirror topic of cluster mirror other")

	// delete needs every topic STOPPED
	dr := e.m.DeleteClusterMirror(ctx, &mirrorproto.DeleteClusterMirrorRequest{MirrorName: "m1", StateValidationOffset: -1})
	expect("delete", dr.ErrorCode, dr.ErrorMessage, mirrorproto.ClusterMirrorNotEmpty, "t1")
	dr = e.m.DeleteClusterMirror(ctx, &mirrorproto.DeleteClusterMirrorRequest{MirrorName: "nope", StateValidationOffset: -1})
	expect("delete unknown", dr.ErrorCode, dr.ErrorMessage, mirrorproto.UnknownClusterMirror, "nope")

	// list and describe
	lr := e.m.ListClusterMirrors(ctx, &mirrorproto.ListClusterMirrorsRequest{IncludeTopicNames: true})
	if len(lr.Mirrors) != 2 || lr.Mirrors[0].MirrorName != "m1" || lr.Mirrors[0].TopicCount != 1 || lr.Mirrors[0].SourceClusterID == "" ||
		lr.Mirrors[0].SourceBootstrap != addrs[0] || lr.Mirrors[0].TopicNames[0] != "t1" {
		t.Fatalf("list: %+v", lr.Mirrors)
	}
	desc := e.m.DescribeClusterMirrors(ctx, &mirrorproto.DescribeClusterMirrorsRequest{MirrorNames: []string{"m1", "nope"}})
	if desc.Mirrors[1].ErrorCode != mirrorproto.UnknownClusterMirror || desc.MaxRetryAttempts != 20 {
		t.Fatalf("describe: %+v", desc)
	}
}

func strOf(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestMirrorConfigs covers the CLUSTER_MIRROR config resource: secrets are never
// returned, alters are validated and stored.
func TestMirrorConfigs(t *testing.T) {
	c, _ := newKfake(t)
	e := newEnv(t)
	e.createMirror("m1", c.ListenAddrs()[0], "sasl.password", "s3cret", "fetch.wait.max.ms", "200")
	cfgs, err := e.m.DescribeMirrorConfigs(ctxT(e.t), "m1")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range cfgs {
		byName[c.Name] = c
	}
	if p := byName["sasl.password"]; !p.IsSensitive || p.Value != nil {
		t.Fatalf("secret returned: %+v", p)
	}
	if w := byName["fetch.wait.max.ms"]; w.Value == nil || *w.Value != "200" || w.IsDefault {
		t.Fatalf("fetch.wait.max.ms: %+v", w)
	}
	if d := byName["topics.exclude"]; d.Value == nil || *d.Value != "__.*" || !d.IsDefault {
		t.Fatalf("topics.exclude default: %+v", d)
	}
	if id := byName["source.cluster.id"]; id.Value == nil || *id.Value != "kfake" || !id.ReadOnly {
		t.Fatalf("source.cluster.id: %+v", id)
	}
	set := func(name, value string) error {
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Op, op.Value = name, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
		return e.m.AlterMirrorConfigs(context.Background(), "m1", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op}, false)
	}
	if err := set("fetch.min.bytes", "x"); err == nil {
		t.Fatal("invalid value accepted")
	}
	if err := set("source.cluster.id", "other"); err == nil {
		t.Fatal("source.cluster.id changed")
	}
	if err := set("mirror.fetch.max.bytes", "2048"); err != nil {
		t.Fatal(err)
	}
	if got := e.local.Metadata().Image().Mirrors["m1"].Configs["fetch.max.bytes"]; got != "2048" {
		t.Fatalf("stored fetch.max.bytes %q", got)
	}
	if _, err := e.m.DescribeMirrorConfigs(ctxT(e.t), "nope"); err == nil {
		t.Fatal("unknown mirror described")
	}
}

// TestSourceLogStart: a source whose log start is above 0 gives a mirror log starting
// there with lag 0; retention on the source while paused is reported as skipped offsets.
func TestSourceLogStart(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(1, "trimmed"))
	addrs := c.ListenAddrs()
	produce(t, addrs, "trimmed", 100)
	deleteRecords(t, src, "trimmed", 40)
	e := newEnv(t)
	e.createMirror("m1", addrs[0])
	e.startTopics("m1", "trimmed")
	e.waitCaughtUp(src, "m1", "trimmed")
	l := e.localLog("trimmed", 0)
	if d := e.describe("m1", "trimmed")[0]; l.LogStartOffset() > 40 || d.Lag != 0 || d.SkippedOffsets != 0 {
		t.Fatalf("log start %d, describe %+v", l.LogStartOffset(), d)
	}
	preq := mirrorproto.NewPauseMirrorTopicsRequest()
	preq.MirrorName, preq.Topics = "m1", []mirrorproto.TopicName{{TopicName: "trimmed"}}
	e.m.PauseMirrorTopics(context.Background(), preq)
	leo := l.LogEndOffset()
	produce(t, addrs, "trimmed", 100)
	end := sourceEnds(t, src, "trimmed")[0]
	deleteRecords(t, src, "trimmed", end-10)
	rreq := mirrorproto.NewResumeMirrorTopicsRequest()
	rreq.MirrorName, rreq.Topics = "m1", preq.Topics
	e.m.ResumeMirrorTopics(context.Background(), rreq)
	e.waitCaughtUp(src, "m1", "trimmed")
	d := e.describe("m1", "trimmed")[0]
	if d.SkippedOffsets < end-10-leo || d.Lag != 0 || l.LogStartOffset() > end-10 {
		t.Fatalf("skipped %d (want at least %d), %+v, log start %d", d.SkippedOffsets, end-10-leo, d, l.LogStartOffset())
	}
	sameBatches(t, "trimmed-0", sourceBatches(t, src, "trimmed", 0), localBatches(t, l))
}

func deleteRecords(t *testing.T, cl interface {
	Request(context.Context, kmsg.Request) (kmsg.Response, error)
}, topic string, offset int64) {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Request(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if code := kresp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("DeleteRecords: %v", kerr.ErrorForCode(code))
	}
}

func TestBrokerConfigFrom(t *testing.T) {
	v, err := config.NewValues(config.Broker, map[string]string{"mirror.failed.retry.max.attempts": "0"}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultBrokerConfig()
	want.RetryMaxAttempts = 0
	if got := BrokerConfigFrom(v).withDefaults(); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
