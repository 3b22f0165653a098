package partition

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kmirror/kmirror/internal/metadata"
)

// TestMirrorAlignmentWait: the replica checks of a mirror partition's LOG_ALIGNMENT over
// a real log (cluster.md §3). Phase 1 waits while the ISR is below min.insync.replicas,
// or, with all (mirror.support.unclean.leader.election), while it is not every replica.
// Phase 2 waits until every ISR member has fetched at the current leader epoch (a new
// epoch forgets their LEOs) from at or below the leader's LEO; after a leader truncation
// the followers past it count as unknown again and the HW stays where it was until they
// fetch from the truncation point. A replica out of the ISR and behind is not waited for,
// except with all. The replica listener is called on follower fetches and role changes.
func TestMirrorAlignmentWait(t *testing.T) {
	r := newReplicated(t, []int32{1, 2}, 2)
	var calls atomic.Int32
	r.p.SetReplicaListener(func() { calls.Add(1) })
	r.produce(10)
	if err := r.fetch(2, 10); err != nil {
		t.Fatal(err)
	}
	if calls.Load() == 0 {
		t.Fatal("a follower fetch did not call the replica listener")
	}
	if why := r.p.MirrorAlignmentWait(false, false); why != "" {
		t.Fatalf("phase 1 with ISR [1 2], min ISR 2: waits (%s)", why)
	}
	if why := r.p.MirrorAlignmentWait(true, false); !strings.Contains(why, "not every replica") {
		t.Fatalf("phase 1 with all and ISR [1 2] of 3 replicas: %q, want a wait for every replica", why)
	}
	if why := r.p.MirrorAlignmentWait(false, true); why != "" {
		t.Fatalf("phase 2 with follower 2 at the leader's LEO and replica 3 out of the ISR: waits (%s)", why)
	}
	if why := r.p.MirrorAlignmentWait(true, true); why == "" {
		t.Fatal("phase 2 with all while replica 3 never fetched: no wait")
	}

	r.apply(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: self, LeaderEpoch: 1, PartitionEpoch: 2})
	if why := r.p.MirrorAlignmentWait(false, false); !strings.Contains(why, "below min.insync.replicas 2") {
		t.Fatalf("phase 1 with ISR [1], min ISR 2: %q, want a wait for min ISR", why)
	}

	before := calls.Load()
	r.apply(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: self, LeaderEpoch: 2, PartitionEpoch: 3})
	if calls.Load() == before {
		t.Fatal("a new leader epoch did not call the replica listener")
	}
	if why := r.p.MirrorAlignmentWait(false, true); !strings.Contains(why, "has not fetched") {
		t.Fatalf("phase 2 at a new leader epoch before any follower fetched: %q, want a wait", why)
	}
	r.fetchAll(10, 2, 3)
	if why := r.p.MirrorAlignmentWait(false, true); why != "" {
		t.Fatalf("phase 2 with every ISR member at the leader's LEO: waits (%s)", why)
	}

	// the leader truncates (a failback): the followers' tails are not its records
	if err := r.p.TruncateToFenced(6); err != nil {
		t.Fatal(err)
	}
	if why := r.p.MirrorAlignmentWait(false, true); !strings.Contains(why, "has not fetched") {
		t.Fatalf("phase 2 after the leader truncated to 6 below the followers' 10: %q, want a wait", why)
	}
	r.produce(6) // records the followers do not hold at 6..11
	if got := r.hw(); got > 6 {
		t.Fatalf("HW %d after the truncation to 6 and new appends, before any follower fetched again", got)
	}
	r.fetchAll(6, 2, 3)
	if why := r.p.MirrorAlignmentWait(false, true); why != "" {
		t.Fatalf("phase 2 with the followers fetching from the truncation point: waits (%s)", why)
	}
}

// TestHoldHighWatermark: while the leader's HW is held (a mirror's LOG_ALIGNMENT before
// it truncates an untrusted log) it does not move — not when a follower catches up and
// the ISR grows to min.insync.replicas, not on appends; a release moves it at once to the
// ISR's lowest LEO. A truncation brings a held HW down with the LEO. A hold is the
// leader's: a follower ignores it, and losing the leadership drops it.
func TestHoldHighWatermark(t *testing.T) {
	r := newReplicated(t, []int32{1, 2}, 3)
	r.produce(10)
	if err := r.fetch(2, 10); err != nil {
		t.Fatal(err)
	}
	if r.hw() != 0 {
		t.Fatalf("HW %d with ISR [1 2] below min.insync.replicas 3, want 0", r.hw())
	}
	r.p.HoldHighWatermark(true)
	if !r.p.HighWatermarkHeld() {
		t.Fatal("HighWatermarkHeld false after HoldHighWatermark(true)")
	}
	// follower 3 rejoins: the ISR reaches min.insync.replicas with every member at 10
	r.apply(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: self, LeaderEpoch: 1, PartitionEpoch: 2})
	r.fetchAll(10, 3, 2)
	if r.hw() != 0 {
		t.Fatalf("held HW moved to %d when the ISR [1 2 3] caught up to 10", r.hw())
	}
	r.produce(2)
	r.fetchAll(12, 2, 3)
	if r.hw() != 0 {
		t.Fatalf("held HW moved to %d after appends the ISR holds", r.hw())
	}

	// the truncation of LOG_ALIGNMENT, then the release: the HW waits for the followers'
	// fetches from the truncation point (their tails are not the leader's records)
	if err := r.p.TruncateToFenced(6); err != nil {
		t.Fatal(err)
	}
	if r.hw() > 6 {
		t.Fatalf("HW %d above the truncation point 6", r.hw())
	}
	r.p.HoldHighWatermark(false)
	if r.p.HighWatermarkHeld() {
		t.Fatal("HighWatermarkHeld true after HoldHighWatermark(false)")
	}
	if r.hw() != 0 {
		t.Fatalf("HW %d on release with the followers' LEOs past the truncation unknown, want 0", r.hw())
	}
	r.fetchAll(6, 2, 3)
	if r.hw() != 6 {
		t.Fatalf("HW %d after the release and the ISR's fetches from 6, want 6", r.hw())
	}

	// a release moves the HW at once to what the ISR holds
	r.p.HoldHighWatermark(true)
	r.produce(3)
	r.fetchAll(9, 2, 3)
	if r.hw() != 6 {
		t.Fatalf("held HW moved to %d", r.hw())
	}
	r.p.HoldHighWatermark(false)
	if r.hw() != 9 {
		t.Fatalf("HW %d right after the release with the ISR at 9, want 9", r.hw())
	}

	// losing the leadership drops a hold; a follower ignores one; a new leader epoch on
	// this broker starts unheld
	r.p.HoldHighWatermark(true)
	r.apply(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 3})
	if r.p.HighWatermarkHeld() {
		t.Fatal("the hold outlived the leadership")
	}
	r.p.HoldHighWatermark(true)
	if r.p.HighWatermarkHeld() {
		t.Fatal("a follower took a hold")
	}
	r.apply(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: self, LeaderEpoch: 4, PartitionEpoch: 4})
	if r.p.HighWatermarkHeld() {
		t.Fatal("a new leader started with a hold")
	}
	r.produce(1)
	r.fetchAll(10, 2, 3)
	if r.hw() != 10 {
		t.Fatalf("HW %d on the new leader with the ISR at 10, want 10", r.hw())
	}
}

// TestHoldOnLead: with a HoldOnLead installed, a broker that becomes leader of a
// partition it says to hold starts with the HW held, from the registration that makes it
// leader on — a follower that catches up and the ISR reaching min.insync.replicas move
// nothing — until the owner decides with HoldHighWatermark; a new leader epoch of the same
// leader keeps the hold it has; the hold goes as soon as an applied image makes HoldOnLead
// say no (here: the topic no longer a mirror topic), but an owner's own hold stays;
// HoldOnLead installed while leading holds at once, removed it releases what it held.
func TestHoldOnLead(t *testing.T) {
	r := newReplicated(t, []int32{1, 2, 3}, 2)
	mirrored := func(reg *metadata.PartitionRegistration) {
		t.Helper()
		tp := topic("t", r.id, reg)
		tp.Mirror = &metadata.MirrorTopic{MirrorName: "m", Desired: metadata.DesiredMirroring}
		r.applyTopic(tp)
		r.reg = reg
	}
	var asked atomic.Int32
	r.rm.SetHoldOnLead(func(im *metadata.Image, tp *metadata.Topic, p int32) bool {
		asked.Add(1)
		return tp.Name == "t" && p == 0 && tp.Mirror != nil
	})
	if r.p.HighWatermarkHeld() {
		t.Fatal("HoldOnLead held the leader of a topic that is no mirror topic")
	}
	r.produce(10)
	r.fetchAll(10, 2, 3)
	if r.hw() != 10 {
		t.Fatalf("HW %d, want 10", r.hw())
	}

	// a follower of the mirror topic holds nothing; the broker becoming its leader is
	// held from that registration on
	mirrored(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2})
	if r.p.HighWatermarkHeld() {
		t.Fatal("a follower holds its HW")
	}
	mirrored(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: self, LeaderEpoch: 3, PartitionEpoch: 3})
	if !r.p.HighWatermarkHeld() {
		t.Fatal("the new leader of a mirror topic started with its HW unheld")
	}
	r.produce(4) // the untrusted tail 10..13
	r.fetchAll(14, 2, 3)
	mirrored(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: self, LeaderEpoch: 3, PartitionEpoch: 4})
	r.fetchAll(14, 2, 3)
	if r.hw() != 10 {
		t.Fatalf("HW %d after the ISR caught up with a held new leader, want 10", r.hw())
	}
	// the truncation's epoch bump: the same leader keeps the hold
	mirrored(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: self, LeaderEpoch: 4, PartitionEpoch: 5})
	if !r.p.HighWatermarkHeld() {
		t.Fatal("a new leader epoch of the same leader dropped the hold")
	}
	// the owner decides: held (an untrusted log), then released after its truncation
	r.p.HoldHighWatermark(true)
	if err := r.p.TruncateToFenced(12); err != nil {
		t.Fatal(err)
	}
	r.p.HoldHighWatermark(false)
	r.fetchAll(12, 2, 3)
	if r.hw() != 12 {
		t.Fatalf("HW %d after the owner's release and the ISR at 12, want 12", r.hw())
	}
	mirrored(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: self, LeaderEpoch: 5, PartitionEpoch: 6})
	if r.p.HighWatermarkHeld() {
		t.Fatal("a new leader epoch of the same leader took a hold")
	}

	// a new leader held by HoldOnLead alone: an image in which the topic is no mirror
	// topic any more releases it at once, and the HW catches up
	mirrored(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 6, PartitionEpoch: 7})
	mirrored(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: self, LeaderEpoch: 7, PartitionEpoch: 8})
	if !r.p.HighWatermarkHeld() {
		t.Fatal("the new leader of a mirror topic started with its HW unheld")
	}
	r.produce(2)
	r.fetchAll(14, 2, 3)
	if r.hw() != 12 {
		t.Fatalf("held HW moved to %d", r.hw())
	}
	r.apply(r.reg) // the same registration, the topic detached
	if r.p.HighWatermarkHeld() {
		t.Fatal("the hold of HoldOnLead outlived the mirror topic")
	}
	if r.hw() != 14 {
		t.Fatalf("HW %d right after the hold went with the ISR at 14, want 14", r.hw())
	}

	// an owner's hold is its own: an image in which HoldOnLead says no leaves it
	mirrored(r.reg)
	r.p.HoldHighWatermark(true)
	r.apply(r.reg)
	if !r.p.HighWatermarkHeld() {
		t.Fatal("an image released the owner's hold")
	}
	r.p.HoldHighWatermark(false)

	// installed while leading: held at once (the broker installs it before it serves);
	// removed: released
	r.rm.SetHoldOnLead(nil)
	mirrored(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: self, LeaderEpoch: 8, PartitionEpoch: 9})
	mirrored(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 9, PartitionEpoch: 10})
	mirrored(&metadata.PartitionRegistration{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: self, LeaderEpoch: 10, PartitionEpoch: 11})
	if r.p.HighWatermarkHeld() {
		t.Fatal("held without a HoldOnLead")
	}
	r.rm.SetHoldOnLead(func(*metadata.Image, *metadata.Topic, int32) bool { return true })
	if !r.p.HighWatermarkHeld() {
		t.Fatal("HoldOnLead installed while leading did not hold")
	}
	r.rm.SetHoldOnLead(nil)
	if r.p.HighWatermarkHeld() {
		t.Fatal("removing HoldOnLead kept its hold")
	}
	if asked.Load() == 0 {
		t.Fatal("HoldOnLead never asked")
	}
}

// TestReleaseOwnedHold: an owner giving a partition up (a mirror runtime dropped) releases
// the hold it set with HoldHighWatermark, but not one the partition took on becoming
// leader that no owner has decided on yet (it belongs to the next owner: a dropped
// runtime must not open the HW of a later leadership over an untrusted tail).
func TestReleaseOwnedHold(t *testing.T) {
	r := newReplicated(t, []int32{1, 2, 3}, 2)
	r.produce(5)
	r.fetchAll(5, 2, 3)
	if r.hw() != 5 {
		t.Fatalf("HW %d, want 5", r.hw())
	}
	r.rm.SetHoldOnLead(func(*metadata.Image, *metadata.Topic, int32) bool { return true })
	if !r.p.HighWatermarkHeld() {
		t.Fatal("HoldOnLead installed while leading did not hold")
	}
	r.produce(3)
	r.fetchAll(8, 2, 3)
	r.p.ReleaseOwnedHold()
	if !r.p.HighWatermarkHeld() || r.hw() != 5 {
		t.Fatalf("ReleaseOwnedHold released the hold taken on becoming leader (held %v, HW %d, want 5)", r.p.HighWatermarkHeld(), r.hw())
	}
	r.p.HoldHighWatermark(true) // the owner decides: its hold now
	r.p.ReleaseOwnedHold()
	if r.p.HighWatermarkHeld() || r.hw() != 8 {
		t.Fatalf("ReleaseOwnedHold kept the owner's hold (held %v, HW %d, want 8)", r.p.HighWatermarkHeld(), r.hw())
	}
}
