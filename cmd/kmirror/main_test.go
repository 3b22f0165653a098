package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/quickstart"
)

// runAsKmirror makes the test binary act as the kmirror binary when set, so that
// `quickstart --scripted` can run its source cluster as a child `kmirror serve`.
const runAsKmirror = "KMIRROR_TEST_RUN_AS_KMIRROR"

func TestMain(m *testing.M) {
	if os.Getenv(runAsKmirror) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestConfigDocsUpToDate fails when docs/configuration.md differs from what
// `kmirror config-docs` prints: run `make docs` after changing internal/config.
func TestConfigDocsUpToDate(t *testing.T) {
	want, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatalf("%v (run `make docs`)", err)
	}
	var got bytes.Buffer
	writeConfigDocs(&got)
	if got.String() != string(want) {
		t.Fatal("docs/configuration.md is stale: run `make docs` and commit it")
	}
}

// TestQuickstartScripted runs the whole disaster-recovery drill of
// `kmirror quickstart --scripted` on free ports, with the source as a child process
// killed with SIGKILL under live load: nothing that reached the destination is lost, the
// failback truncates exactly the source's divergent tail, which holds every acknowledged
// record the destination lacks (the measured RPO).
func TestQuickstartScripted(t *testing.T) {
	if testing.Short() {
		t.Skip("the drill starts two clusters")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := quickstart.RunScripted(context.Background(), quickstart.Options{
		Data: t.TempDir(), Out: &out, Executable: exe, Env: append(os.Environ(), runAsKmirror+"=1"),
	})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("drill failed: %v\n%s", err, rep.Summary())
	}
	if rep.Lost != 0 || rep.Duplicates > rep.DuplicateBound || rep.Truncated != int64(rep.SourceTail) || rep.Unmirrored > rep.SourceTail || rep.LiveAcked == 0 {
		t.Fatalf("unexpected report: %+v", rep)
	}
	if !strings.HasPrefix(rep.Summary(), "quickstart drill PASSED") {
		t.Fatal(rep.Summary())
	}
}
