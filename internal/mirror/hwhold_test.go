package mirror

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	replica "github.com/kmirror/kmirror/internal/partition"
)

// stallProxy forwards TCP connections to a source broker; stalled, it accepts them and
// never answers (a source whose requests hang until request.timeout.ms).
type stallProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	stalled bool
	conns   map[net.Conn]bool
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sp := &stallProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); sp.closeAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			sp.mu.Lock()
			stalled := sp.stalled
			sp.conns[c] = true
			sp.mu.Unlock()
			if stalled {
				continue // held open, never answered
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			sp.mu.Lock()
			sp.conns[up] = true
			sp.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return sp
}

func (sp *stallProxy) addr() string { return sp.ln.Addr().String() }

// set stalls (true) or forwards (false) from now on, closing every connection so far.
func (sp *stallProxy) set(stalled bool) {
	sp.mu.Lock()
	sp.stalled = stalled
	sp.mu.Unlock()
	sp.closeAll()
}

func (sp *stallProxy) closeAll() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for c := range sp.conns {
		c.Close()
	}
	clear(sp.conns)
}

// startProbe runs the manager with before called first in Start: after the broker
// applied the image that made it leader and installed the manager's HoldOnLead, before
// any runtime exists and before the broker serves.
type startProbe struct {
	*Manager
	before func()
}

func (s startProbe) Start(ctx context.Context) error {
	s.before()
	return s.Manager.Start(ctx)
}

// TestHWHeldFromBecome: a broker that becomes leader of a mirror partition whose log is
// untrusted — a failback asked for and not yet aligned, here after a restart, the leader
// change a one-broker cluster has — holds its HW from that moment, before the mirror
// runtime that decides exists, and without a gap until the runtime's truncation
// (cluster.md §3, Manager.HoldOnLead). Then the truncation releases it (the HW at the
// new LEO); in the other subtest the topic is stopped instead, and the failover releases
// it with the divergent records kept.
func TestHWHeldFromBecome(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop bool
	}{{"truncation", false}, {"stopped", true}} {
		t.Run(tc.name, func(t *testing.T) { hwHeldFromBecome(t, tc.stop) })
	}
}

func hwHeldFromBecome(t *testing.T, stop bool) {
	src, dst := startBroker(t), startBroker(t)
	scl := src.client()
	createTopicOn(t, scl, "orders", 1)
	produceN(t, scl, "orders", 0, 0, 5)
	proxy := newStallProxy(t, src.b.Addr())
	ed := dst.env()
	ed.createMirror("m", proxy.addr(), "request.timeout.ms", "30000")
	ed.startTopics("m", "orders")
	ed.waitCaughtUp(scl, "m", "orders")

	// failover, then writes of the destination's own: the divergent tail of a failback
	ed.stopTopics("m", "orders")
	ed.waitState("m", "orders", mirrorproto.StateStopped)
	produceN(t, dst.client(), "orders", 0, 100, 3)
	const mirrored = 5
	dl, err := dst.b.Log("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	leo := dl.LogEndOffset() // the mirrored records, the failover's MIRROR_PID_RESET, the 3

	// the failback is asked for while the source hangs (the desired state recorded as
	// StartMirrorTopics does once it listed the source topic): the partition stays
	// untrusted; the STOPPED partition is held from the request on
	proxy.set(true)
	tt := dst.b.Metadata().Image().Topics["orders"]
	st := &sourceTopic{name: "orders", id: tt.ID, partitions: make([]kmsg.MetadataResponseTopicPartition, tt.Partitions)}
	if err := dst.m.startTopic(context.Background(), "m", st, nil); err != nil {
		t.Fatal(err)
	}
	dst.m.reconcile()
	if part, err := dst.m.local.Partition("orders", 0); err != nil || !part.HighWatermarkHeld() {
		t.Fatalf("a STOPPED partition whose failback is asked for is not held (%v)", err)
	}
	dst.stop()

	// the broker comes back as the partition's leader; its HW is held before the runtime
	// exists, and is never seen unheld until the truncation
	var heldAtStart atomic.Bool
	var gap atomic.Value // string: what the poller saw
	done := make(chan struct{})
	var polled sync.WaitGroup
	dst.wrap = func(local *broker.Broker, m *Manager) broker.Mirrors {
		return startProbe{Manager: m, before: func() {
			part, err := local.Partition("orders", 0)
			if err != nil {
				gap.Store("no partition before Start: " + err.Error())
				return
			}
			heldAtStart.Store(part.HighWatermarkHeld())
			polled.Add(1)
			go func() {
				defer polled.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					held := part.HighWatermarkHeld()
					if !held && part.Log().LogEndOffset() == leo && part.IsLeader() {
						gap.CompareAndSwap(nil, "the HW was unheld before the truncation")
					}
					time.Sleep(200 * time.Microsecond)
				}
			}()
		}}
	}
	dst.start()
	ed = dst.env()
	if !heldAtStart.Load() {
		t.Fatal("the new leader's HW was not held before the mirror runtime started")
	}
	part, err := dst.m.local.Partition("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the runtime took over, the source still hangs
	if !part.HighWatermarkHeld() {
		t.Fatal("the runtime released the hold of an untrusted log before its truncation")
	}
	if hw := part.Log().HighWatermark(); hw > leo {
		t.Fatalf("HW %d above the LEO %d", hw, leo)
	}

	settled := func() {
		close(done)
		polled.Wait()
		if g := gap.Load(); g != nil {
			t.Fatal(g)
		}
	}
	if stop {
		settled() // a stop releases the hold with the tail kept: the watch ends here
		ed.stopTopics("m", "orders")
		ed.waitState("m", "orders", mirrorproto.StateStopped)
	} else {
		proxy.set(false)
		ed.waitCaughtUp(scl, "m", "orders")
		settled()
	}
	if part.HighWatermarkHeld() {
		t.Fatal("HW still held after the runtime left LOG_ALIGNMENT")
	}
	if hw, end := part.Log().HighWatermark(), part.Log().LogEndOffset(); hw != end {
		t.Fatalf("HW %d, LEO %d after the hold went", hw, end)
	}
	if end := part.Log().LogEndOffset(); !stop && end != mirrored || stop && end < leo {
		t.Fatalf("LEO %d (stopped %v): want %d after the truncation, or the divergent tail to %d kept", end, stop, mirrored, leo)
	}
}

// TestHoldOnLead: the manager's answer to the replica manager at become — hold a new
// leader's HW — is yes only for a partition of a mirror topic whose mirror exists and
// that is not being stopped, while the manager runs: every other partition has no runtime
// that would release the hold, so none is taken (or a held one goes at the next image,
// replica.ReplicaManager.SetHoldOnLead).
func TestHoldOnLead(t *testing.T) {
	e := newEnv(t)
	im := &metadata.Image{Mirrors: map[string]*metadata.Mirror{"m": {Name: "m"}}}
	mt := func(desired metadata.DesiredState, mirror string) *metadata.Topic {
		return &metadata.Topic{Name: "orders", Partitions: 2, Mirror: &metadata.MirrorTopic{MirrorName: mirror, Desired: desired}}
	}
	for _, tc := range []struct {
		what string
		t    *metadata.Topic
		p    int32
		want bool
	}{
		{"mirroring", mt(metadata.DesiredMirroring, "m"), 1, true},
		{"paused (a restart aligns first)", mt(metadata.DesiredPaused, "m"), 0, true},
		{"stopped", mt(metadata.DesiredStopped, "m"), 0, false},
		{"mirror deleted", mt(metadata.DesiredMirroring, "gone"), 0, false},
		{"not a mirror topic", &metadata.Topic{Name: "orders", Partitions: 2}, 0, false},
		{"no such partition", mt(metadata.DesiredMirroring, "m"), 2, false},
	} {
		if got := e.m.HoldOnLead(im, tc.t, tc.p); got != tc.want {
			t.Errorf("%s: HoldOnLead %v, want %v", tc.what, got, tc.want)
		}
	}
	var _ replica.HoldOnLeadFunc = e.m.HoldOnLead
	m := e.m
	e.stop()
	// closed (the broker shuts down): it answers the same, as releasing an undecided
	// hold then would advance the HW over an untrusted tail before the HW checkpoint
	if !m.HoldOnLead(im, mt(metadata.DesiredMirroring, "m"), 0) {
		t.Error("a closed manager stopped holding new leaders of mirror topics")
	}
}
