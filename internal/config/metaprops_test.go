package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRandomUUID checks Kafka's text form and that IDs are version 4 and distinct.
func TestRandomUUID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		s := RandomUUID()
		if len(s) != 22 || s[0] == '-' || seen[s] {
			t.Fatalf("RandomUUID() = %q (seen %v)", s, seen[s])
		}
		seen[s] = true
		u, err := decodeUUID(s)
		if err != nil || u[6]>>4 != 4 || u[8]>>6 != 2 {
			t.Fatalf("%s: %v, version %d variant %d", s, err, u[6]>>4, u[8]>>6)
		}
		if c, err := ParseClusterID(s); err != nil || c != s {
			t.Fatalf("ParseClusterID(%s) = %q, %v", s, c, err)
		}
	}
}

// TestParseClusterID checks Kafka's Uuid.fromString rules and the reserved UUIDs.
func TestParseClusterID(t *testing.T) {
	cases := []struct{ in, want, err string }{
		{"MkU3OEVBNTcwNTJENDM2Qg", "MkU3OEVBNTcwNTJENDM2Qg", ""},
		{"PsUQhyizSbmLweamXxvmqw==", "PsUQhyizSbmLweamXxvmqw", ""},
		{"industrial-streaming-cluster-001", "", "Cluster ID string industrial-streaming-cluster-001 does not appear to be a valid UUID: Input string with prefix `industrial-streaming-clu` is too long to be decoded as a base64 UUID"},
		{"abc", "", "Cluster ID string abc does not appear to be a valid UUID: Input string `abc` decoded as 2 bytes, which is not equal to the expected 16 bytes of a base64-encoded UUID"},
		{"MkU3OEVBNTcwNTJENDM2Q+", "", "Cluster ID string MkU3OEVBNTcwNTJENDM2Q+ does not appear to be a valid UUID: Input string `MkU3OEVBNTcwNTJENDM2Q+` is not base64url"},
		{"", "", "Cluster ID string  does not appear to be a valid UUID: Input string `` decoded as 0 bytes, which is not equal to the expected 16 bytes of a base64-encoded UUID"},
		{"AAAAAAAAAAAAAAAAAAAAAA", "", "cluster ID AAAAAAAAAAAAAAAAAAAAAA is a reserved UUID (Kafka's Uuid.RESERVED): use `kmirror storage random-uuid`"},
		{"AAAAAAAAAAAAAAAAAAAAAQ", "", "cluster ID AAAAAAAAAAAAAAAAAAAAAQ is a reserved UUID (Kafka's Uuid.RESERVED): use `kmirror storage random-uuid`"},
	}
	for _, c := range cases {
		got, err := ParseClusterID(c.in)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("ParseClusterID(%q) = %q, %v; want %q, %s", c.in, got, err, c.want, c.err)
		}
	}
}

// TestMetaPropertiesRoundTrip writes and reads back Kafka's version 1 file, atomically.
func TestMetaPropertiesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := &MetaProperties{Version: 1, ClusterID: "MkU3OEVBNTcwNTJENDM2Qg", NodeID: 3, DirectoryID: RandomUUID()}
	if err := WriteMetaProperties(dir, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMetaProperties(dir)
	if err != nil || *got != *m {
		t.Fatalf("read %+v, %v; want %+v", got, err, m)
	}
	body, _ := os.ReadFile(filepath.Join(dir, MetaPropertiesFile))
	for _, line := range []string{"version=1", "cluster.id=MkU3OEVBNTcwNTJENDM2Qg", "node.id=3", "directory.id=" + m.DirectoryID} {
		if !strings.Contains(string(body), "\n"+line+"\n") {
			t.Errorf("meta.properties has no line %q:\n%s", line, body)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files left in %s: %v", dir, entries)
	}
}

// TestReadMetaProperties checks Kafka's MetaProperties rules for reading a file.
func TestReadMetaProperties(t *testing.T) {
	cases := []struct {
		name, body string
		want       MetaProperties
		err        string // suffix after "<path>: "
	}{
		{"kmirror before directory.id", "#\n#kmirror\nversion=1\ncluster.id=c\nnode.id=1\n", MetaProperties{Version: 1, ClusterID: "c", NodeID: 1}, ""},
		{"Kafka's order and date comment", "#\n#Tue Mar 12 10:34:55 UTC 2024\nnode.id=2\ndirectory.id=Zy1GExi8TKWVhrMAp0ySVA\nversion=1\ncluster.id=c\n", MetaProperties{Version: 1, ClusterID: "c", NodeID: 2, DirectoryID: "Zy1GExi8TKWVhrMAp0ySVA"}, ""},
		{"version 0 with broker.id", "cluster.id=c\nbroker.id=5\n", MetaProperties{Version: 0, ClusterID: "c", NodeID: 5}, ""},
		{"version 0 without broker.id", "cluster.id=c\n", MetaProperties{Version: 0, ClusterID: "c", NodeID: -1}, ""},
		{"bad version", "version=x\n", MetaProperties{}, "Invalid meta.properties version string 'x'"},
		{"unknown version", "version=2\n", MetaProperties{}, "Unknown meta.properties version number 2"},
		{"no cluster.id", "version=1\nnode.id=1\n", MetaProperties{}, "cluster.id was not found."},
		{"no node.id", "version=1\ncluster.id=c\n", MetaProperties{}, "node.id was not found."},
		{"bad node.id", "version=1\ncluster.id=c\nnode.id=one\n", MetaProperties{}, "Unable to read node.id as a base-10 number."},
		{"bad directory.id", "version=1\ncluster.id=c\nnode.id=1\ndirectory.id=xyz\n", MetaProperties{}, "Unable to read directory.id as a Uuid: Input string `xyz` decoded as 2 bytes, which is not equal to the expected 16 bytes of a base64-encoded UUID"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, MetaPropertiesFile), []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadMetaProperties(dir)
			if c.err != "" {
				want := filepath.Join(dir, MetaPropertiesFile) + ": " + c.err
				if err == nil || err.Error() != want {
					t.Fatalf("err %v, want %s", err, want)
				}
				return
			}
			if err != nil || *got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
	if _, err := ReadMetaProperties(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestCheckFormatted checks start-up: Legacy formats itself as one-node kmirror always
// has; a cluster node needs `kmirror storage format`; node and cluster IDs must match.
func TestCheckFormatted(t *testing.T) {
	legacy := &Node{NodeID: 1, Legacy: true}
	cluster := &Node{NodeID: 1}

	t.Run("legacy creates it once", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "new", "data")
		id, err := CheckFormatted(dir, legacy, "")
		if err != nil {
			t.Fatal(err)
		}
		m, err := ReadMetaProperties(dir)
		if err != nil || m.ClusterID != id || m.NodeID != 1 || m.Version != 1 || len(m.DirectoryID) != 22 {
			t.Fatalf("created %+v, %v (cluster ID %s)", m, err, id)
		}
		if again, err := CheckFormatted(dir, legacy, ""); err != nil || again != id {
			t.Fatalf("second start: %q, %v; want %q", again, err, id)
		}
		if _, err := CheckFormatted(dir, &Node{NodeID: 2, Legacy: true}, ""); err == nil || !strings.HasPrefix(err.Error(), "Stored node id 1 doesn't match previous node id 2 in "+filepath.Join(dir, MetaPropertiesFile)+". If you moved your data") {
			t.Fatalf("node.id 2: %v", err)
		}
	})
	t.Run("cluster needs formatting", func(t *testing.T) {
		dir := t.TempDir()
		_, err := CheckFormatted(dir, cluster, "")
		want := "log.dirs " + dir + " is not formatted: run `kmirror storage format -t <cluster-id> -c <config>` (kmirror storage random-uuid makes a cluster ID)"
		if err == nil || err.Error() != want {
			t.Fatalf("err %v, want %s", err, want)
		}
		if _, err := os.Stat(filepath.Join(dir, MetaPropertiesFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a cluster node wrote meta.properties: %v", err)
		}
	})
	t.Run("cluster formatted", func(t *testing.T) {
		dir := t.TempDir()
		if err := WriteMetaProperties(dir, &MetaProperties{Version: 1, ClusterID: "MkU3OEVBNTcwNTJENDM2Qg", NodeID: 1, DirectoryID: RandomUUID()}); err != nil {
			t.Fatal(err)
		}
		for _, quorum := range []string{"", "MkU3OEVBNTcwNTJENDM2Qg"} {
			if id, err := CheckFormatted(dir, cluster, quorum); err != nil || id != "MkU3OEVBNTcwNTJENDM2Qg" {
				t.Fatalf("quorum %q: %q, %v", quorum, id, err)
			}
		}
		path := filepath.Join(dir, MetaPropertiesFile)
		if _, err := CheckFormatted(dir, cluster, "AAAAAAAAAAAAAAAAAAAAAg"); err == nil || err.Error() != "Invalid cluster.id in: "+path+". Expected AAAAAAAAAAAAAAAAAAAAAg, but read MkU3OEVBNTcwNTJENDM2Qg" {
			t.Fatalf("other cluster: %v", err)
		}
		if _, err := CheckFormatted(dir, &Node{NodeID: 7}, ""); err == nil || !strings.HasPrefix(err.Error(), "Stored node id 1 doesn't match previous node id 7") {
			t.Fatalf("node.id 7: %v", err)
		}
	})
	t.Run("reserved directory.id", func(t *testing.T) {
		dir := t.TempDir()
		if err := WriteMetaProperties(dir, &MetaProperties{Version: 1, ClusterID: "c", NodeID: 1, DirectoryID: "AAAAAAAAAAAAAAAAAAAAAQ"}); err != nil {
			t.Fatal(err)
		}
		if _, err := CheckFormatted(dir, cluster, ""); err == nil || err.Error() != "Invalid reserved directory ID AAAAAAAAAAAAAAAAAAAAAQ found in "+dir {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("version 0 without cluster.id", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, MetaPropertiesFile), []byte("broker.id=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := CheckFormatted(dir, legacy, ""); err == nil || err.Error() != filepath.Join(dir, MetaPropertiesFile)+": cluster.id was not found." {
			t.Fatalf("err %v", err)
		}
	})
}
