package mirror

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// TestCreateRefusesBadMirrorNames: names outside Kafka's topic-name alphabet (they would
// break the CLI's whitespace-separated columns) or too long for the fetchers' client ID
// are refused with INVALID_REQUEST naming the rule, before the source is contacted.
func TestCreateRefusesBadMirrorNames(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"bad name/x", "tab\tname", "ünïcode", strings.Repeat("m", maxMirrorNameLen+1)} {
		req := &mirrorproto.CreateClusterMirrorRequest{MirrorName: name,
			Config: []mirrorproto.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: "127.0.0.1:1"}}}
		resp := e.m.CreateClusterMirror(ctxT(t), req)
		if resp.ErrorCode != kerr.InvalidRequest.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "a-z A-Z 0-9 . _ -") {
			t.Errorf("%.20q: %d %v", name, resp.ErrorCode, resp.ErrorMessage)
		}
	}
}
