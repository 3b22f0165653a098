package robustness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// mesh routes every inter-broker connection of a cluster of combined nodes through its
// own toxiproxy proxy, so that one node's replication paths can be cut or degraded
// without touching the others'.
//
// Node n's inter.broker.listener.name is REPLn, and every node m has a REPLn listener:
// node n dials node m (replica fetches, the broker's peer requests) on m's advertised
// REPLn endpoint, which is proxy n→m's port, forwarding to m's REPLn listener. So the
// path from n to m is proxy n→m alone, for every ordered pair. Clients use the PLAINTEXT
// listener and the metadata quorum the CONTROLLER listener, both direct.
type mesh struct {
	server  *toxiproxy.ApiServer
	proxies map[[2]int32]*toxiproxy.Proxy // by (from, to)
	cut     map[[2]int32]bool
}

// replListener is the name of node n's inter-broker listener.
func replListener(n int32) string { return "REPL" + strconv.Itoa(int(n)) }

// newMeshCluster writes a cluster of `nodes` combined nodes whose inter-broker paths go
// through a mesh, and starts it.
func newMeshCluster(t *testing.T, nodes int, props map[string]string) (*clustertest.Cluster, *mesh) {
	t.Helper()
	c := clustertest.New(t, clustertest.Spec{Combined: nodes, Props: props})
	m := &mesh{
		server:  toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()),
		proxies: map[[2]int32]*toxiproxy.Proxy{},
		cut:     map[[2]int32]bool{},
	}
	t.Cleanup(func() {
		for _, p := range m.proxies {
			p.Stop()
		}
	})
	ports := clustertest.FreePorts(t, 2*nodes*nodes)
	next := func() string {
		p := ports[0]
		ports = ports[1:]
		return "127.0.0.1:" + strconv.Itoa(p)
	}
	protoMap := []string{"PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"}
	for i := 1; i <= nodes; i++ {
		protoMap = append(protoMap, replListener(int32(i))+":PLAINTEXT")
	}
	for _, to := range c.Nodes {
		listeners := []string{"PLAINTEXT://" + to.Addr, "CONTROLLER://" + to.CtrlAddr}
		advertised := []string{"PLAINTEXT://" + to.Addr}
		for _, from := range c.Nodes {
			name := replListener(from.ID)
			ln := next()
			listeners = append(listeners, name+"://"+ln)
			if from.ID == to.ID {
				advertised = append(advertised, name+"://"+ln)
				continue
			}
			p := toxiproxy.NewProxy(m.server, fmt.Sprintf("%d->%d", from.ID, to.ID), next(), ln)
			if err := p.Start(); err != nil {
				t.Fatalf("toxiproxy %s: %v", p.Name, err)
			}
			m.proxies[[2]int32{from.ID, to.ID}] = p
			advertised = append(advertised, name+"://"+p.Listen)
		}
		to.Props["listeners"] = strings.Join(listeners, ",")
		to.Props["advertised.listeners"] = strings.Join(advertised, ",")
		to.Props["listener.security.protocol.map"] = strings.Join(protoMap, ",")
		to.Props["inter.broker.listener.name"] = replListener(to.ID)
	}
	for _, n := range c.Nodes {
		n.Spawn()
	}
	for _, n := range c.Nodes {
		n.WaitServing()
	}
	c.WaitBrokers(nodes)
	return c, m
}

// blackhole makes the path from → to drop every byte both ways (toxiproxy's timeout toxic
// with timeout 0: connections stay open, nothing gets through) until heal.
func (m *mesh) blackhole(t *testing.T, from, to int32) {
	t.Helper()
	p := m.proxies[[2]int32{from, to}]
	if m.cut[[2]int32{from, to}] {
		return
	}
	for _, dir := range []string{"upstream", "downstream"} {
		js := fmt.Sprintf(`{"name":"blackhole_%s","type":"timeout","stream":%q,"toxicity":1,"attributes":{"timeout":0}}`, dir, dir)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			t.Fatalf("toxic on %s: %v", p.Name, err)
		}
	}
	m.cut[[2]int32{from, to}] = true
}

// latency delays every inter-broker path by ms (±jitter) each way, so that followers
// trail their leaders and a leader's failure finds writes only it has.
func (m *mesh) latency(t *testing.T, ms, jitter int) {
	t.Helper()
	for _, p := range m.proxies {
		for _, dir := range []string{"upstream", "downstream"} {
			js := fmt.Sprintf(`{"name":"latency_%s","type":"latency","stream":%q,"toxicity":1,"attributes":{"latency":%d,"jitter":%d}}`, dir, dir, ms, jitter)
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
				t.Fatalf("toxic on %s: %v", p.Name, err)
			}
		}
	}
}

// isolate blackholes every inter-broker path to and from node id.
func (m *mesh) isolate(t *testing.T, id int32) {
	t.Helper()
	for k := range m.proxies {
		if k[0] == id || k[1] == id {
			m.blackhole(t, k[0], k[1])
		}
	}
}

// heal removes the toxics of the path from → to.
func (m *mesh) heal(from, to int32) {
	m.proxies[[2]int32{from, to}].Toxics.ResetToxics(context.Background())
	delete(m.cut, [2]int32{from, to})
}

// healAll removes every toxic: the connections opened meanwhile carry data again (the
// bytes dropped are lost, so the peers see broken streams and reconnect).
func (m *mesh) healAll() {
	for k, p := range m.proxies {
		p.Toxics.ResetToxics(context.Background())
		delete(m.cut, k)
	}
}
