package broker_test

import (
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/config"
)

// TestApiVersionsOfEachListener: a KRaft-style node (process.roles=broker,controller)
// answers ApiVersions on its broker listener and on its controller listener with the
// registry's table of each (apis.go), and the two differ as the registry says: the
// controller RPCs on the controller listener only.
func TestApiVersionsOfEachListener(t *testing.T) {
	port := freePort(t)
	dir := t.TempDir()
	m := &config.MetaProperties{Version: 1, ClusterID: config.RandomUUID(), NodeID: 1, DirectoryID: config.RandomUUID()}
	if err := config.WriteMetaProperties(dir, m); err != nil {
		t.Fatal(err)
	}
	ctrlAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	b := brokertest.Start(t, map[string]string{
		"process.roles":                    "broker,controller",
		"node.id":                          "1",
		"controller.quorum.voters":         "1@" + ctrlAddr,
		"listeners":                        "PLAINTEXT://127.0.0.1:0,CONTROLLER://" + ctrlAddr,
		"controller.listener.names":        "CONTROLLER",
		"listener.security.protocol.map":   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs":                         dir,
		"offsets.topic.replication.factor": "1",
	})
	brokerWant, controllerWant := broker.ServedAPIs(b.Broker)
	if slices.Equal(apiRanges(brokerWant), apiRanges(controllerWant)) {
		t.Fatal("the registry serves the same table on both listeners")
	}
	for _, l := range []struct {
		name, addr string
		want       []kmsg.ApiVersionsResponseApiKey
	}{{"broker", b.Addr(), brokerWant}, {"controller", ctrlAddr, controllerWant}} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
		r := dialRaw(t, l.addr).request(req).(*kmsg.ApiVersionsResponse)
		if got := apiRanges(r.ApiKeys); r.ErrorCode != 0 || !slices.Equal(got, apiRanges(l.want)) {
			t.Errorf("%s listener: ApiVersions error %d, %v; the registry serves %v", l.name, r.ErrorCode, got, apiRanges(l.want))
		}
	}
}

// freePort is a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
