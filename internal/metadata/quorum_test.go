package metadata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/netmux"
)

const (
	// testFetchTimeout is the quorum's fetch and election timeout in these tests: short, so
	// that elections take well under a second, but long enough for the race detector.
	testFetchTimeout = 300 * time.Millisecond
	// testWait bounds every wait of these tests; a healthy run never comes close.
	testWait = 20 * time.Second
	testCID  = "Ek1c5vPxT9ahIFVBRtd6Jw"
)

// testLogger discards, unless KMIRROR_TEST_LOG is set (then it writes to stderr).
func testLogger(id int32) *slog.Logger {
	if os.Getenv("KMIRROR_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", id)
}

// node is one kmirror node of a test quorum: a listener on 127.0.0.1 shared through a
// netmux.Mux, and its Controller.
type node struct {
	t          *testing.T
	id         int32
	dir        string
	addr       string // host:port of the listener, kept across restarts
	voters     []Voter
	controller bool
	clusterID  string

	ln     net.Listener
	mux    *netmux.Mux
	served chan error
	c      *Controller
}

func newNode(t *testing.T, id int32, controller bool) *node {
	t.Helper()
	n := &node{t: t, id: id, dir: t.TempDir(), controller: controller, clusterID: testCID}
	n.listen()
	n.addr = n.ln.Addr().String()
	t.Cleanup(n.stop)
	return n
}

// listen binds the node's listener: a port from the kernel the first time, the same port
// after a restart.
func (n *node) listen() {
	n.t.Helper()
	addr := n.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		n.t.Fatalf("node %d: listen: %v", n.id, err)
	}
	n.ln = ln
}

// open starts the node's mux and controller; Open errors are returned.
func (n *node) open() error {
	n.t.Helper()
	if n.ln == nil {
		n.listen()
	}
	n.mux = netmux.New(n.ln, testLogger(n.id))
	raftL := n.mux.Claim(netmux.RaftByte)
	n.served = make(chan error, 1)
	go func() { n.served <- n.mux.Serve() }()
	c, err := Open(Options{
		Dir: n.dir, NodeID: n.id, ClusterID: n.clusterID, Logger: testLogger(n.id),
		Voters: n.voters, ControllerRole: n.controller, RaftListener: raftL,
		ElectionTimeout: testFetchTimeout, FetchTimeout: testFetchTimeout,
	})
	if err != nil {
		n.stopMux()
		return err
	}
	n.c = c
	return nil
}

func (n *node) start() {
	n.t.Helper()
	if err := n.open(); err != nil {
		n.t.Fatalf("node %d: Open: %v", n.id, err)
	}
}

func (n *node) stopMux() {
	if n.mux != nil {
		n.mux.Close()
		if err := <-n.served; err != nil {
			n.t.Errorf("node %d: Serve: %v", n.id, err)
		}
	}
	n.mux, n.ln = nil, nil
}

// stop closes the node's controller and listener; the data directory stays.
func (n *node) stop() {
	if n.c != nil {
		if err := n.c.Close(); err != nil {
			n.t.Errorf("node %d: Close: %v", n.id, err)
		}
		n.c = nil
	}
	n.stopMux()
}

// newQuorum returns voters nodes 1..voters, each configured with all of them, not started.
func newTestQuorum(t *testing.T, voters int) []*node {
	t.Helper()
	var nodes []*node
	var vs []Voter
	for i := range voters {
		n := newNode(t, int32(i+1), true)
		nodes = append(nodes, n)
		vs = append(vs, Voter{ID: n.id, Addr: n.addr})
	}
	for _, n := range nodes {
		n.voters = vs
	}
	return nodes
}

// eventually polls cond until it holds, failing the test after testWait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func running(nodes []*node) []*node {
	var out []*node
	for _, n := range nodes {
		if n.c != nil {
			out = append(out, n)
		}
	}
	return out
}

// waitLeader waits until one running node is the active controller and every running node
// knows it, and returns it.
func waitLeader(t *testing.T, nodes []*node) *node {
	t.Helper()
	var leader *node
	eventually(t, "one active controller known to all", func() bool {
		leader = nil
		for _, n := range running(nodes) {
			if n.c.IsLeader() {
				if leader != nil {
					return false
				}
				leader = n
			}
		}
		if leader == nil {
			return false
		}
		for _, n := range running(nodes) {
			if id, addr, ok := n.c.Leader(); !ok || id != leader.id || addr != leader.addr {
				return false
			}
		}
		return true
	})
	return leader
}

// applyOnLeader applies recs on whichever node is the active controller, retrying when
// leadership moves meanwhile.
func applyOnLeader(t *testing.T, nodes []*node, recs ...Record) *Image {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		leader := waitLeader(t, nodes)
		im, err := leader.c.Apply(context.Background(), recs...)
		if err == nil {
			return im
		}
		if !errors.Is(err, ErrNotController) || time.Now().After(deadline) {
			t.Fatalf("Apply on node %d: %v", leader.id, err)
		}
	}
}

// waitTopic waits until every running node's image has topic name.
func waitTopic(t *testing.T, nodes []*node, name string) {
	t.Helper()
	for _, n := range running(nodes) {
		eventually(t, fmt.Sprintf("topic %s on node %d", name, n.id), func() bool {
			_, ok := n.c.Image().Topic(name)
			return ok
		})
	}
}

func ctxWait(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	t.Cleanup(cancel)
	return ctx
}

func TestQuorumReplicatesAndFailsOver(t *testing.T) {
	nodes := newTestQuorum(t, 3)
	for _, n := range nodes {
		n.start()
	}
	leader := waitLeader(t, nodes)
	for _, n := range nodes {
		id, addr, err := n.c.WaitForLeader(ctxWait(t))
		if err != nil || id != leader.id || addr != leader.addr {
			t.Fatalf("node %d: WaitForLeader = %d %s %v, want %d %s", n.id, id, addr, err, leader.id, leader.addr)
		}
		if err := n.c.WaitReplayed(ctxWait(t)); err != nil {
			t.Fatalf("node %d: WaitReplayed: %v", n.id, err)
		}
		eventually(t, fmt.Sprintf("cluster ID on node %d", n.id), func() bool { return n.c.Image().ClusterID == testCID })
		if got := n.c.Voters(); !reflect.DeepEqual(got, n.voters) {
			t.Fatalf("node %d: Voters = %v, want %v", n.id, got, n.voters)
		}
		if got := n.c.Observers(); len(got) != 0 {
			t.Fatalf("node %d: Observers = %v", n.id, got)
		}
		if l := <-n.c.SubscribeLeadership(); l.Active != (n == leader) || l.Epoch == 0 {
			t.Fatalf("node %d: leadership %+v, leader is %d", n.id, l, leader.id)
		}
	}
	epoch := leader.c.Term()

	// A write on the active controller reaches every node; followers refuse writes.
	im := applyOnLeader(t, nodes, TopicRecord{Name: "t1", ID: NewTopicID(), Partitions: 3})
	for _, n := range nodes {
		if err := n.c.WaitApplied(ctxWait(t), im.Offset); err != nil {
			t.Fatalf("node %d: WaitApplied: %v", n.id, err)
		}
		if tp, ok := n.c.Image().Topic("t1"); !ok || tp.Partitions != 3 {
			t.Fatalf("node %d: topic t1 = %+v after WaitApplied", n.id, tp)
		}
		if n.c.AppliedIndex() < im.Offset || n.c.LastIndex() < im.Offset {
			t.Fatalf("node %d: applied %d last %d, want >= %d", n.id, n.c.AppliedIndex(), n.c.LastIndex(), im.Offset)
		}
		if n == leader {
			continue
		}
		_, err := n.c.Apply(context.Background(), TopicRecord{Name: "refused", ID: NewTopicID(), Partitions: 1})
		if !errors.Is(err, ErrNotController) || !strings.Contains(err.Error(), fmt.Sprintf("node %d", leader.id)) {
			t.Fatalf("node %d: Apply on a follower: %v", n.id, err)
		}
		if err := n.c.AddNonvoter(context.Background(), 9, "127.0.0.1:1"); !errors.Is(err, ErrNotController) {
			t.Fatalf("node %d: AddNonvoter on a follower: %v", n.id, err)
		}
		if err := n.c.RemoveServer(context.Background(), 9); !errors.Is(err, ErrNotController) {
			t.Fatalf("node %d: RemoveServer on a follower: %v", n.id, err)
		}
	}

	// The active controller stops: another is elected and accepts writes.
	oldSub := leader.c.SubscribeLeadership()
	leader.stop()
	for range oldSub { // drained, then closed by Close
	}
	next := waitLeader(t, nodes)
	if next == leader {
		t.Fatal("the stopped node is still the leader")
	}
	if e := next.c.Term(); e <= epoch {
		t.Fatalf("new leader epoch %d, want > %d", e, epoch)
	}
	im = applyOnLeader(t, nodes, TopicRecord{Name: "t2", ID: NewTopicID(), Partitions: 1})
	waitTopic(t, nodes, "t2")

	// The stopped voter restarts on the same port and catches up.
	leader.start()
	if err := leader.c.WaitReplayed(ctxWait(t)); err != nil {
		t.Fatalf("WaitReplayed after restart: %v", err)
	}
	if _, ok := leader.c.Image().Topic("t1"); !ok {
		t.Fatal("restarted voter lost t1")
	}
	if err := leader.c.WaitApplied(ctxWait(t), im.Offset); err != nil {
		t.Fatal(err)
	}
	if _, ok := leader.c.Image().Topic("t2"); !ok {
		t.Fatal("restarted voter did not catch up with t2")
	}
	applyOnLeader(t, nodes, TopicRecord{Name: "t3", ID: NewTopicID(), Partitions: 1})
	waitTopic(t, nodes, "t3")
}

func TestQuorumObserver(t *testing.T) {
	nodes := newTestQuorum(t, 3)
	for _, n := range nodes {
		n.start()
	}
	obs := newNode(t, 4, false)
	obs.voters = nodes[0].voters
	obs.start()
	if _, _, ok := obs.c.Leader(); ok {
		t.Fatal("an observer not yet added knows a leader")
	}
	leader := waitLeader(t, nodes)

	ctx := ctxWait(t)
	if err := leader.c.AddNonvoter(ctx, 4, obs.addr); err != nil {
		t.Fatalf("AddNonvoter: %v", err)
	}
	if err := leader.c.AddNonvoter(ctx, nodes[1].id, "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "voter") {
		t.Fatalf("AddNonvoter of a voter: %v", err)
	}
	if err := leader.c.AddNonvoter(ctx, 5, "no-port"); err == nil {
		t.Fatal("AddNonvoter accepted an address without a port")
	}
	want := []Voter{{ID: 4, Addr: obs.addr}}
	if got := leader.c.Observers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Observers = %v, want %v", got, want)
	}
	applyOnLeader(t, nodes, TopicRecord{Name: "seen-by-observer", ID: NewTopicID(), Partitions: 2})
	all := append(slices.Clone(nodes), obs)
	waitTopic(t, all, "seen-by-observer")
	if id, _, err := obs.c.WaitForLeader(ctx); err != nil || id != leader.id {
		t.Fatalf("observer: WaitForLeader = %d, %v; want %d", id, err, leader.id)
	}
	if got := obs.c.Observers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("observer's Observers = %v, want %v", got, want)
	}
	if _, err := obs.c.Apply(context.Background(), MirrorRecord{Name: "m"}); !errors.Is(err, ErrNotController) {
		t.Fatalf("Apply on an observer: %v", err)
	}
	sub := obs.c.SubscribeLeadership()

	// The active controller stops: a voter takes over, never the observer, which follows.
	leader.stop()
	next := waitLeader(t, all)
	if next == obs {
		t.Fatal("the observer became the active controller")
	}
	applyOnLeader(t, all, TopicRecord{Name: "after-failover", ID: NewTopicID(), Partitions: 1})
	waitTopic(t, all, "after-failover")
	if obs.c.IsLeader() {
		t.Fatal("the observer is the active controller")
	}
	for done := false; !done; {
		select {
		case l := <-sub:
			if l.Active {
				t.Fatalf("the observer was told it leads: %+v", l)
			}
		default:
			done = true
		}
	}

	if err := next.c.RemoveServer(ctx, 4); err != nil {
		t.Fatalf("RemoveServer: %v", err)
	}
	if got := next.c.Observers(); len(got) != 0 {
		t.Fatalf("Observers after RemoveServer = %v", got)
	}
}

func TestQuorumClusterIDMismatch(t *testing.T) {
	nodes := newTestQuorum(t, 3)
	nodes[0].start()
	nodes[1].start()
	waitLeader(t, nodes[:2]) // two of three voters are a quorum
	for _, n := range nodes[:2] {
		eventually(t, fmt.Sprintf("cluster ID on node %d", n.id), func() bool { return n.c.Image().ClusterID == testCID })
		if err := n.c.Err(); err != nil {
			t.Fatalf("node %d: Err = %v", n.id, err)
		}
	}

	// A voter formatted for another cluster learns the log's cluster ID and fails.
	other := nodes[2]
	other.clusterID = "AAAAAAAAAAAAAAAAAAAAAA"
	other.start()
	select {
	case <-other.c.Failed():
	case <-time.After(testWait):
		t.Fatal("no cluster ID mismatch reported")
	}
	if err := other.c.Err(); !errors.Is(err, ErrInconsistentClusterID) || !strings.Contains(err.Error(), testCID) {
		t.Fatalf("Err = %v", err)
	}
	if err := other.c.WaitReplayed(ctxWait(t)); !errors.Is(err, ErrInconsistentClusterID) {
		t.Fatalf("WaitReplayed = %v", err)
	}
	if _, _, err := other.c.WaitForLeader(ctxWait(t)); !errors.Is(err, ErrInconsistentClusterID) {
		t.Fatalf("WaitForLeader = %v", err)
	}
	other.stop()

	// Once a snapshot holds the cluster ID, Open itself refuses another one.
	n := nodes[0]
	if err := n.c.raft.Snapshot().Error(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	n.stop()
	n.clusterID = "AAAAAAAAAAAAAAAAAAAAAA"
	if err := n.open(); !errors.Is(err, ErrInconsistentClusterID) {
		t.Fatalf("Open with another cluster ID: %v", err)
	}
}

func TestQuorumSingleVoter(t *testing.T) {
	nodes := newTestQuorum(t, 1)
	n := nodes[0]
	n.start()
	if id, _, err := n.c.WaitForLeader(ctxWait(t)); err != nil || id != 1 {
		t.Fatalf("WaitForLeader = %d, %v", id, err)
	}
	eventually(t, "cluster ID", func() bool { return n.c.Image().ClusterID == testCID })
	im := applyOnLeader(t, nodes, MirrorRecord{Name: "m"})
	n.stop()

	n.start()
	if err := n.c.WaitReplayed(ctxWait(t)); err != nil {
		t.Fatal(err)
	}
	if got := n.c.Image(); got.Offset < im.Offset || got.Mirrors["m"] == nil || got.ClusterID != testCID {
		t.Fatalf("after restart: %+v", got)
	}
}

// fakeListener is a listener that is never accepted from, with a chosen address.
type fakeListener struct{ addr net.Addr }

func (fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (fakeListener) Close() error              { return nil }
func (f fakeListener) Addr() net.Addr          { return f.addr }

func TestQuorumConfigErrors(t *testing.T) {
	ln := fakeListener{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9093}}
	wildcard := fakeListener{&net.TCPAddr{IP: net.IPv4zero, Port: 9092}}
	three := []Voter{{1, "h1:9093"}, {2, "h2:9093"}, {3, "h3:9093"}}
	voter := func(mod func(*Options)) Options {
		o := Options{Dir: t.TempDir(), NodeID: 1, ClusterID: testCID, Logger: testLogger(1),
			Voters: three, ControllerRole: true, RaftListener: ln}
		mod(&o)
		return o
	}
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"duplicate ID", voter(func(o *Options) { o.Voters = []Voter{{1, "h1:1"}, {1, "h2:1"}} }), "node ID 1 appears twice"},
		{"duplicate address", voter(func(o *Options) { o.Voters = []Voter{{1, "h1:1"}, {2, "h1:1"}} }), "address h1:1 appears twice"},
		{"address without port", voter(func(o *Options) { o.Voters = []Voter{{1, "h1"}} }), "not HOST:PORT"},
		{"negative ID", voter(func(o *Options) { o.Voters = []Voter{{-1, "h1:1"}} }), "negative node ID"},
		{"controller not a voter", voter(func(o *Options) { o.NodeID = 4 }), "node.id 4 has the controller role (process.roles) but is not in controller.quorum.voters 1@h1:9093,2@h2:9093,3@h3:9093"},
		{"broker in voters", voter(func(o *Options) { o.ControllerRole = false }), "process.roles does not contain controller"},
		{"no cluster ID", voter(func(o *Options) { o.ClusterID = "" }), "meta.properties"},
		{"no raft listener", voter(func(o *Options) { o.RaftListener = nil }), "RaftListener"},
		{"advertised differs", voter(func(o *Options) { o.AdvertisedRaftAddr = "other:9093" }), "advertises raft address other:9093"},
		{"negative timeout", voter(func(o *Options) { o.FetchTimeout = -1 }), "negative"},
		{"observer on a wildcard address", voter(func(o *Options) { o.NodeID, o.ControllerRole, o.RaftListener = 4, false, wildcard }), "AdvertisedRaftAddr"},
	}
	for _, tc := range cases {
		c, err := Open(tc.opts)
		if err == nil {
			c.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Open = %v, want an error with %q", tc.name, err, tc.want)
		}
	}

	// The one-node mode's log cannot become a quorum's: its voter is the in-memory node.
	dir := t.TempDir()
	c := open(t, dir, testCID)
	c.Close()
	n := newNode(t, 1, true)
	n.dir = dir
	n.voters = []Voter{{1, n.addr}}
	if err := n.open(); err == nil || !strings.Contains(err.Error(), "voters of a log do not change") {
		t.Fatalf("Open of a one-node log with voters: %v", err)
	}
}

// blackhole accepts connections and never answers, like a peer that hangs.
func blackhole(t *testing.T) (addr string, dialled <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			once.Do(func() { close(ch) })
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), ch
}

func TestQuorumCloseWithHungPeers(t *testing.T) {
	n := newNode(t, 1, true)
	a2, dialled2 := blackhole(t)
	a3, dialled3 := blackhole(t)
	n.voters = []Voter{{1, n.addr}, {2, a2}, {3, a3}}
	n.start()
	// The lone voter becomes a candidate and asks both hung peers for votes.
	for _, ch := range []<-chan struct{}{dialled2, dialled3} {
		select {
		case <-ch:
		case <-time.After(testWait):
			t.Fatal("the voter did not contact its peers")
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- n.c.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(transportTimeout / 2):
		t.Fatal("Close waits for hung peers")
	}
	n.c = nil
}
