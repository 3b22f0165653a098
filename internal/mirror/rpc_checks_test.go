package mirror

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// TestCreateRefusesBadMirrorNames: names outside Kafka's topic-name alphabet (they would
// break the CLI's whitespace-separated columns) or too long for the fetchers' client ID
// are refused with INVALID_REQUEST naming the rule, before the source is contacted.
func TestCreateRefusesBadMirrorNames(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"bad name/x", "tab\tname", "ünïcode", ".", "..", strings.Repeat("m", maxMirrorNameLen+1)} {
		req := &mirrorproto.CreateClusterMirrorRequest{MirrorName: name,
			Config: []mirrorproto.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: "127.0.0.1:1"}}}
		resp := e.m.CreateClusterMirror(ctxT(t), req)
		if resp.ErrorCode != kerr.InvalidRequest.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "a-z A-Z 0-9 . _ -") {
			t.Errorf("%.20q: %d %v", name, resp.ErrorCode, resp.ErrorMessage)
		}
	}
}

// TestStartPausedTopic: starting a paused topic by name does not claim it started; it
// answers MIRROR_TOPIC_ALREADY_PAUSED pointing at --resume; a pattern leaves it out
// without an error; the topic stays PAUSED.
func TestStartPausedTopic(t *testing.T) {
	_, _, _, e := mirroredPair(t, "payments", 1, "m", "payments")
	e.pauseTopics("m", "payments")
	resp := e.startResp("m", "payments")
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != mirrorproto.MirrorTopicAlreadyPaused ||
		resp.Topics[0].ErrorMessage == nil || !strings.Contains(*resp.Topics[0].ErrorMessage, "--resume") {
		t.Fatalf("start of a paused topic: %+v", resp)
	}
	// a pattern leaves it alone: no error, so `--start --topics '.*'` still works
	if resp := e.startResp("m", ".*"); resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Fatalf("pattern start with a paused topic: %+v", resp)
	}
	e.waitState("m", "payments", mirrorproto.StatePaused)
}

// TestAlterRefusesOtherCluster: a new bootstrap.servers that answers with another cluster
// ID is refused with INVALID_CONFIG (a typo would otherwise have that cluster's topic
// configs copied); another spelling of the source's own address is accepted.
func TestAlterRefusesOtherCluster(t *testing.T) {
	src, dst, _, _ := mirroredPair(t, "payments", 1, "m", "payments")
	other := startBroker(t)
	set := func(addr string) error {
		return dst.m.AlterMirrorConfigs(ctxT(t), "m", []kmsg.IncrementalAlterConfigsRequestResourceConfig{
			{Name: "bootstrap.servers", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr(addr)}}, false)
	}
	err := set(other.b.Addr())
	var me *mirrorproto.Error
	if !errors.As(err, &me) || me.Code != kerr.InvalidConfig.Code || !strings.Contains(me.Message, "mirrors cluster") {
		t.Fatalf("bootstrap.servers of another cluster: %v", err)
	}
	_, port, _ := net.SplitHostPort(src.b.Addr())
	if err := set("localhost:" + port); err != nil {
		t.Fatalf("the source under another name: %v", err)
	}
}
