package metadata

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
)

// TestScramCredentialRecords: a credential is set per user and mechanism, replaced,
// survives a snapshot and the log's replay, is removed (the user with its last one);
// removing a missing one is ErrUnknownScramCredential, an empty name or unknown
// mechanism ErrInvalidRecord; earlier images never change.
func TestScramCredentialRecords(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, "")
	cred := func(name string, mech int8, key byte) UserScramCredentialRecord {
		return UserScramCredentialRecord{Name: name, Mechanism: mech, Salt: []byte{key}, StoredKey: []byte{key, 1}, ServerKey: []byte{key, 2}, Iterations: 4096}
	}
	first := apply(t, c, cred("alice", 1, 10), cred("alice", 2, 20), cred("bob", 1, 30))
	im := apply(t, c, cred("alice", 1, 11))
	if got := first.ScramCredentials["alice"][1]; !bytes.Equal(got.Salt, []byte{10}) {
		t.Fatalf("an earlier image changed: %+v", got)
	}
	for _, check := range []*Image{im, cloneImage(t, im)} {
		if a := check.ScramCredentials["alice"]; len(a) != 2 || !bytes.Equal(a[1].StoredKey, []byte{11, 1}) || a[2].Iterations != 4096 {
			t.Fatalf("alice's credentials %+v", a)
		}
	}
	im = apply(t, c, RemoveUserScramCredentialRecord{Name: "bob", Mechanism: 1}, RemoveUserScramCredentialRecord{Name: "alice", Mechanism: 2})
	if _, ok := im.ScramCredentials["bob"]; ok || len(im.ScramCredentials["alice"]) != 1 {
		t.Fatalf("after removals: %+v", im.ScramCredentials)
	}
	if _, err := c.Apply(t.Context(), RemoveUserScramCredentialRecord{Name: "bob", Mechanism: 1}); !errors.Is(err, ErrUnknownScramCredential) {
		t.Fatalf("removing a missing credential: %v", err)
	}
	for _, bad := range []UserScramCredentialRecord{cred("", 1, 1), cred("carol", 3, 1)} {
		if _, err := c.Apply(t.Context(), bad); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
	c.Close()
	c = open(t, dir, "")
	defer c.Close()
	if a := c.Image().ScramCredentials["alice"]; len(a) != 1 || !bytes.Equal(a[1].ServerKey, []byte{11, 2}) {
		t.Fatalf("after replay: %+v", c.Image().ScramCredentials)
	}
}

// TestBootstrapRecords: Options.Bootstrap is written with the ClusterRecord of a new log
// (kmirror storage format --add-scram), and ignored once the log has a cluster ID.
func TestBootstrapRecords(t *testing.T) {
	dir := t.TempDir()
	boot := []Record{UserScramCredentialRecord{Name: "admin", Mechanism: 1, Salt: []byte{1}, StoredKey: []byte{2}, ServerKey: []byte{3}, Iterations: 4096}}
	c, err := Open(Options{Dir: dir, NodeID: 1, Bootstrap: boot, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Image().ScramCredentials["admin"][1] == nil {
		t.Fatalf("bootstrap records not applied: %+v", c.Image().ScramCredentials)
	}
	apply(t, c, RemoveUserScramCredentialRecord{Name: "admin", Mechanism: 1})
	c.Close()
	c, err = Open(Options{Dir: dir, NodeID: 1, Bootstrap: boot, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Image().ScramCredentials) != 0 {
		t.Fatalf("bootstrap records applied again on reopen: %+v", c.Image().ScramCredentials)
	}
}
