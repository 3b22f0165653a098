package mirrorscli

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// TestPromote runs --promote between two real brokers: refused while a producer writes
// to the source; --dry-run changes nothing (describe before and after identical); with
// the producer stopped it stops the topic with every acknowledged record on the
// destination and the group's offsets synced.
func TestPromote(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	src := brokertest.Start(t, nil)
	sadm := kadm.NewClient(src.Client())
	if _, err := sadm.CreateTopic(ctx, 2, 1, nil, "pt"); err != nil {
		t.Fatal(err)
	}
	pc := src.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 10; i++ {
		if err := pc.ProduceSync(ctx, &kgo.Record{Topic: "pt", Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "pt", Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := sadm.CommitOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}
	dst := brokertest.Start(t, nil)
	dst.MirrorFrom(ctx, "m", src.Addr(), "pt")
	promote := func(extra ...string) (string, string, error) {
		return runCmd(t, append([]string{"--bootstrap-server", dst.Addr(), "--promote", "--mirror", "m", "--topics", "pt"}, extra...)...)
	}

	// ready: caught up with the sync tasks run once (the dry run, which changes nothing, says)
	for {
		out, _, _ := promote("--dry-run")
		if strings.Contains(out, "Dry run: --promote would wait for a final run") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("never ready to promote:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// a producer writing all along: refused for its records, nothing stopped
	wctx, stopWriting := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for wctx.Err() == nil {
			pc.ProduceSync(wctx, &kgo.Record{Topic: "pt", Partition: 1, Value: []byte("more")})
			time.Sleep(5 * time.Millisecond)
		}
	}()
	_, errOut, err := promote()
	stopWriting()
	wg.Wait()
	if err == nil || !strings.Contains(errOut, "Error: refusing to promote: ") || !strings.Contains(errOut, "LAG") && !strings.Contains(errOut, "records were produced on the source meanwhile") {
		t.Fatalf("promote under a live producer: %v\n%s", err, errOut)
	}
	if out, _, _ := runCmd(t, "--bootstrap-server", dst.Addr(), "--describe", "--mirror", "m"); strings.Contains(out, "STOPPED") {
		t.Fatalf("a refused promote stopped partitions:\n%s", out)
	}

	// caught up: the dry run says what it would do and changes nothing
	describe := func() string {
		out, errOut, err := runCmd(t, "--bootstrap-server", dst.Addr(), "--describe", "--mirror", "m", "--json")
		if err != nil {
			t.Fatalf("describe: %v %s", err, errOut)
		}
		return out
	}
	for strings.Count(describe(), `"lag": 0,`) != 2 {
		if ctx.Err() != nil {
			t.Fatalf("the mirror did not catch up: %s", describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		out, _, _ := promote("--dry-run")
		if strings.Contains(out, "Dry run: --promote would wait for a final run") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("never ready to promote after the producer stopped:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := describe()
	out, errOut, err := runCmd(t, "--bootstrap-server", dst.Addr(), "--stop", "--mirror", "m", "--topics", "p.*", "--dry-run")
	if err != nil || out != "Dry run: --stop would fail over pt of mirror m on "+dst.Addr()+": 2 partitions (2 MIRRORING); a failover now would lose 0 records (their LAG). Nothing was changed.\n" {
		t.Fatalf("--stop --dry-run: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = promote("--dry-run")
	if err != nil || !strings.Contains(out, "2 partitions, LAG 0 in total (a failover now would lose 0 records)") || !strings.Contains(out, "Dry run: --promote would wait for a final run") {
		t.Fatalf("dry run: %v\n%s%s", err, out, errOut)
	}
	if after := describe(); after != before {
		t.Fatalf("the dry run changed the mirror:\nbefore %s\nafter  %s", before, after)
	}

	out, errOut, err = promote()
	if err != nil || !strings.Contains(out, "Promoted: pt are writable on "+dst.Addr()+" with 0 records lost") {
		t.Fatalf("promote: %v\n%s%s", err, out, errOut)
	}
	dadm := kadm.NewClient(dst.Client())
	sEnds, err := sadm.ListEndOffsets(ctx, "pt")
	if err != nil {
		t.Fatal(err)
	}
	dEnds, err := dadm.ListEndOffsets(ctx, "pt")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		s, _ := sEnds.Lookup("pt", p)
		d, _ := dEnds.Lookup("pt", p)
		if d.Offset != s.Offset+1 { // + the failover's MIRROR_PID_RESET
			t.Errorf("pt-%d: destination end %d, source end %d: want source + 1 (nothing lost)", p, d.Offset, s.Offset)
		}
	}
	got, err := dadm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("pt", 0); !ok || o.At != 1 {
		t.Errorf("group g on the destination: %+v, want offset 1 synced (source ends %v, destination ends %v)", o, sEnds, dEnds)
	}
	if _, _, err := runCmd(t, "--bootstrap-server", dst.Addr(), "--promote", "--mirror", "m", "--topics", "pt"); err == nil {
		t.Error("a second promote of the stopped topic succeeded")
	}
}
