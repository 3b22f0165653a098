package controller

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/metadata"
)

// image returns an image with the given brokers: ID → rack, "" for none; IDs in fenced
// are fenced.
func image(racks map[int32]string, fenced ...int32) *metadata.Image {
	im := &metadata.Image{Brokers: map[int32]*metadata.BrokerRegistration{}, Topics: map[string]*metadata.Topic{}}
	for id, r := range racks {
		im.Brokers[id] = &metadata.BrokerRegistration{ID: id, Rack: r, Fenced: slices.Contains(fenced, id),
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}}
	}
	return im
}

func TestPlaceStripesLeadersOverBrokers(t *testing.T) {
	im := image(map[int32]string{1: "", 2: "", 3: ""})
	got, err := Place(im, 12, 1, nil, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	count := map[int32]int{}
	for _, r := range got {
		if len(r) != 1 {
			t.Fatalf("replicas %v, want one", r)
		}
		count[r[0]]++
	}
	if count[1] != 4 || count[2] != 4 || count[3] != 4 {
		t.Fatalf("12 partitions over 3 brokers: %v, want 4 each", count)
	}
}

func TestPlaceRackAware(t *testing.T) {
	im := image(map[int32]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"})
	got, err := Place(im, 30, 3, nil, rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	for _, r := range got {
		racks := map[string]bool{}
		for _, id := range r {
			racks[im.Brokers[id].Rack] = true
		}
		if len(racks) != 3 {
			t.Fatalf("replicas %v span racks %v, want all three", r, racks)
		}
		leaders[r[0]]++
	}
	for id := int32(1); id <= 6; id++ {
		if leaders[id] != 5 {
			t.Fatalf("leaders per broker %v, want 5 each", leaders)
		}
	}
}

func TestPlaceNeverLeadsOnFencedBroker(t *testing.T) {
	im := image(map[int32]string{1: "", 2: "", 3: ""}, 2)
	got, err := Place(im, 20, 3, nil, rand.New(rand.NewPCG(5, 6)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		if r[0] == 2 {
			t.Fatalf("leader on the fenced broker: %v", r)
		}
		if len(r) != 3 || r[0] == r[1] || r[1] == r[2] || r[0] == r[2] {
			t.Fatalf("replicas %v", r)
		}
	}
}

func TestPlaceContinuesAfterExistingPartitions(t *testing.T) {
	im := image(map[int32]string{1: "", 2: "", 3: ""})
	existing := []*metadata.PartitionRegistration{{Replicas: []int32{1}}, {Replicas: []int32{2}}}
	for seed := uint64(0); seed < 20; seed++ {
		got, err := Place(im, 1, 1, existing, rand.New(rand.NewPCG(seed, seed)))
		if err != nil {
			t.Fatal(err)
		}
		if got[0][0] != 3 {
			t.Fatalf("the partition after those led by 1 and 2 is led by %d, want 3", got[0][0])
		}
	}
}

func TestPlaceErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		im   *metadata.Image
		rf   int16
		want string
	}{
		{"too few brokers", image(map[int32]string{1: "", 2: ""}), 3, "The target replication factor of 3 cannot be reached because only 2 broker(s) are registered."},
		{"all fenced", image(map[int32]string{1: ""}, 1), 1, "All brokers are currently fenced."},
		{"no broker", image(nil), 1, "All brokers are currently fenced."},
		{"zero", image(map[int32]string{1: ""}), 0, "must be positive"},
	} {
		_, err := Place(tc.im, 1, tc.rf, nil, rand.New(rand.NewPCG(1, 1)))
		var rf *ErrInvalidReplicationFactor
		if !errors.As(err, &rf) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
