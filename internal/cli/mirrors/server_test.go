package mirrorscli

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// testBroker is a tiny broker on a real loopback socket: it answers
// ApiVersions (advertising the mirror keys) and passes mirror requests to
// handle, recording them.
type testBroker struct {
	addr   string
	handle func(kmsg.Request) kmsg.Response

	mu  sync.Mutex
	got []kmsg.Request
}

func startBroker(t *testing.T, handle func(kmsg.Request) kmsg.Response) *testBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	b := &testBroker{addr: ln.Addr().String(), handle: handle}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(c)
		}
	}()
	return b
}

func (b *testBroker) requests() []kmsg.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]kmsg.Request(nil), b.got...)
}

func (b *testBroker) serve(c net.Conn) {
	defer c.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, frame); err != nil {
			return
		}
		key := int16(binary.BigEndian.Uint16(frame[0:]))
		version := int16(binary.BigEndian.Uint16(frame[2:]))
		corr := binary.BigEndian.Uint32(frame[4:])
		body := frame[10:]
		if n := int16(binary.BigEndian.Uint16(frame[8:])); n > 0 {
			body = body[n:]
		}
		req := mirrorproto.NewRequest(key)
		if req == nil {
			req = kmsg.RequestForKey(key)
		}
		if req == nil {
			return
		}
		req.SetVersion(version)
		if req.IsFlexible() {
			body = body[1:]
		}
		if err := req.ReadFrom(body); err != nil {
			return
		}
		var resp kmsg.Response
		if av, ok := req.(*kmsg.ApiVersionsRequest); ok {
			r := kmsg.NewPtrApiVersionsResponse()
			r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MaxVersion: 9}, {ApiKey: 3, MaxVersion: 12}, {ApiKey: 18, MaxVersion: 4}}
			for _, a := range mirrorproto.APIs() {
				r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: a.Key})
			}
			if av.Version > 4 {
				r.ErrorCode, version = 35, 0
			}
			resp = r
		} else {
			b.mu.Lock()
			b.got = append(b.got, req)
			b.mu.Unlock()
			resp = b.handle(req)
			if resp == nil {
				return
			}
		}
		resp.SetVersion(version)
		out := binary.BigEndian.AppendUint32(nil, corr)
		if resp.IsFlexible() && key != 18 {
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...)); err != nil {
			return
		}
	}
}

func sp(s string) *string { return &s }

// describeResponse has two mirrors, unsorted, with a FAILED partition, a
// truncation report and unknown offsets.
func describeResponse() *mirrorproto.DescribeClusterMirrorsResponse {
	r := mirrorproto.NewDescribeClusterMirrorsResponse()
	p := func(i int32, src, dst, lag int64, st mirrorproto.State) mirrorproto.DescribeClusterMirrorsResponsePartition {
		x := mirrorproto.NewDescribeClusterMirrorsResponsePartition(i)
		x.SourceOffset, x.DestinationOffset, x.Lag, x.State = src, dst, lag, st
		return x
	}
	p1 := p(1, 100, 90, 10, mirrorproto.StateMirroring)
	p1.TruncatedOffset, p1.TruncatedRecords = 15, 5
	failed := p(0, -1, 7, -1, mirrorproto.StateFailed)
	failed.RetryAttempt, failed.ErrorMessage = 3, sp("fetch failed: connection refused")
	gone := p(0, -1, -1, -1, mirrorproto.StateFailed)
	gone.RetryAttempt, gone.ErrorMessage = -1, sp("The source topic is deleted.")
	r.Mirrors = []mirrorproto.DescribeClusterMirrorsResponseMirror{
		{MirrorName: "zeta", Topics: []mirrorproto.DescribeClusterMirrorsResponseTopic{{TopicName: "gone", Partitions: []mirrorproto.DescribeClusterMirrorsResponsePartition{gone}}}},
		{MirrorName: "alpha", Topics: []mirrorproto.DescribeClusterMirrorsResponseTopic{
			{TopicName: "orders", Partitions: []mirrorproto.DescribeClusterMirrorsResponsePartition{p1, p(0, 50, 50, 0, mirrorproto.StateMirroring)}},
			{TopicName: "audit", Partitions: []mirrorproto.DescribeClusterMirrorsResponsePartition{failed}},
		}, SyncTasks: []mirrorproto.DescribeClusterMirrorsSyncTask{
			{Task: "group-offsets", LastSuccessMs: 1700000000000, LastErrorMs: -1},
			{Task: "topic-configs", LastSuccessMs: -1, LastErrorMs: 1700000001000, LastError: sp("DescribeConfigs on the source: boom"), ErrorCount: 2},
		}},
	}
	return r
}

func TestDescribeOutput(t *testing.T) {
	b := startBroker(t, func(kmsg.Request) kmsg.Response { return describeResponse() })
	out, errOut, err := runCmd(t, "--bootstrap-server", b.addr, "--describe")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	want := `MIRROR  TOPIC   PARTITION  SOURCE-OFFSET  DESTINATION-OFFSET  LAG  STATE
alpha   audit   0          -              7                   -    FAILED
alpha   orders  0          50             50                  0    MIRRORING
alpha   orders  1          100            90                  10   MIRRORING
zeta    gone    0          -              -                   -    FAILED

Failback truncations:
MIRROR  TOPIC   PARTITION  TRUNCATED-TO  TRUNCATED-RECORDS
alpha   orders  1          15            5

Sync tasks:
MIRROR  TASK           LAST-SUCCESS          ERRORS  LAST-ERROR-AT         LAST-ERROR
alpha   group-offsets  2023-11-14T22:13:20Z  0       -                     -
alpha   topic-configs  -                     2       2023-11-14T22:13:21Z  ` + strings.ReplaceAll("DescribeConfigs on the source: boom", " ", "\u00a0") + `
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	for _, line := range strings.Split(out, "\n")[6:] {
		if len(strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })) >= 7 { // as awk splits
			t.Errorf("a line after the partition table has 7 fields or more (scripts count them): %q", line)
		}
	}

	out, _, err = runCmd(t, "--bootstrap-server", b.addr, "--describe", "--failed")
	if err != nil {
		t.Fatal(err)
	}
	want = `MIRROR  TOPIC  PARTITION  RETRY         ERROR
alpha   audit  0          3/20          fetch failed: connection refused
zeta    gone   0          NonRetryable  The source topic is deleted.
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}

	out, _, err = runCmd(t, "--bootstrap-server", b.addr, "--describe", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var entries []DescribeEntry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(entries) != 4 || entries[2].Topic != "orders" || entries[2].TruncatedTo == nil || *entries[2].TruncatedTo != 15 || entries[0].SourceOffset != nil || entries[0].State != "FAILED" {
		t.Errorf("json %s", out)
	}
	if !strings.Contains(out, `"destination_offset": 7`) || !strings.Contains(out, `"lag": null`) {
		t.Errorf("json field names: %s", out)
	}
}

func TestStartSplitsNamesAndPatterns(t *testing.T) {
	b := startBroker(t, func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*mirrorproto.StartMirrorTopicsResponse)
		resp.Topics = []mirrorproto.TopicResult{{Name: "orders"}, {Name: "x", ErrorCode: mirrorproto.TopicAlreadyInClusterMirror, ErrorMessage: sp("x is in mirror other")}}
		return resp
	})
	out, errOut, err := runCmd(t, "--bootstrap-server", b.addr, "--add", "--mirror", "my-mirror", "--topic", "orders,.*", "--exclude", "__.*,tmp")
	if err == nil {
		t.Fatal("no error for a failed topic")
	}
	if out != "Started mirroring topic orders in mirror my-mirror.\n" {
		t.Errorf("stdout %q", out)
	}
	if errOut != "Error: TOPIC_ALREADY_IN_CLUSTER_MIRROR: topic x: x is in mirror other\n" {
		t.Errorf("stderr %q", errOut)
	}
	reqs := b.requests()
	if len(reqs) != 1 {
		t.Fatalf("requests %v", reqs)
	}
	got := reqs[0].(*mirrorproto.StartMirrorTopicsRequest)
	want := &mirrorproto.StartMirrorTopicsRequest{MirrorName: "my-mirror",
		Topics:          []mirrorproto.StartMirrorTopicsRequestTopic{{TopicName: "orders"}},
		IncludePatterns: []string{".*"}, ExcludePatterns: []string{"__.*", "tmp"}, StateValidationOffset: -1}
	want.Version = got.Version
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sent %+v, want %+v", got, want)
	}
}

func TestCreateAndBrokerError(t *testing.T) {
	b := startBroker(t, func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*mirrorproto.CreateClusterMirrorResponse)
		resp.ErrorCode, resp.ErrorMessage = mirrorproto.ClusterMirrorAlreadyExists, sp("cluster mirror my-mirror already exists")
		return resp
	})
	path := filepath.Join(t.TempDir(), "m.properties")
	if err := os.WriteFile(path, []byte("bootstrap.servers=src:9092\nmirror.fetch.max.bytes=1048576\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := runCmd(t, "--bootstrap-server", b.addr, "--create", "--mirror", "my-mirror", "--mirror-config", path)
	if err == nil || errOut != "Error: CLUSTER_MIRROR_ALREADY_EXISTS: cluster mirror my-mirror already exists\n" {
		t.Fatalf("err %v, stderr %q", err, errOut)
	}
	got := b.requests()[0].(*mirrorproto.CreateClusterMirrorRequest)
	if got.MirrorName != "my-mirror" || len(got.Config) != 2 || got.Config[1] != (mirrorproto.CreateClusterMirrorRequestConfig{Name: "mirror.fetch.max.bytes", Value: "1048576"}) {
		t.Errorf("sent %+v", got)
	}
}

func TestPauseExpandsRegexAgainstMirrorTopics(t *testing.T) {
	b := startBroker(t, func(req kmsg.Request) kmsg.Response {
		switch req.(type) {
		case *mirrorproto.DescribeClusterMirrorsRequest:
			return describeResponse()
		case *mirrorproto.PauseMirrorTopicsRequest:
			resp := req.ResponseKind().(*mirrorproto.PauseMirrorTopicsResponse)
			for _, t := range req.(*mirrorproto.PauseMirrorTopicsRequest).Topics {
				resp.Topics = append(resp.Topics, mirrorproto.TopicResult{Name: t.TopicName})
			}
			return resp
		}
		return nil
	})
	out, errOut, err := runCmd(t, "--bootstrap-server", b.addr, "--pause", "--mirror", "alpha", "--topics", "ord.*,extra")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	reqs := b.requests()
	pause := reqs[len(reqs)-1].(*mirrorproto.PauseMirrorTopicsRequest)
	if len(pause.Topics) != 2 || pause.Topics[0].TopicName != "extra" || pause.Topics[1].TopicName != "orders" || pause.StateValidationOffset != -1 {
		t.Errorf("sent %+v", pause)
	}
	if !strings.Contains(out, "Paused mirroring topic orders in mirror alpha.") {
		t.Errorf("stdout %q", out)
	}
}

func TestList(t *testing.T) {
	b := startBroker(t, func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*mirrorproto.ListClusterMirrorsResponse)
		resp.Mirrors = []mirrorproto.ListClusterMirrorsResponseMirror{
			{MirrorName: "m2", SourceBootstrap: "b:9092", TopicCount: 0},
			{MirrorName: "m1", SourceBootstrap: "a:9092", SourceClusterID: "Xy12", TopicCount: 3},
		}
		return resp
	})
	out, _, err := runCmd(t, "--bootstrap-server", b.addr, "--list")
	if err != nil {
		t.Fatal(err)
	}
	want := `MIRROR  TOPICS  SOURCE-CLUSTER-ID  SOURCE-BOOTSTRAP-SERVER
m1      3       Xy12               a:9092
m2      0       -                  b:9092
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}
