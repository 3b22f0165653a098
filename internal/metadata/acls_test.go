package metadata

import (
	"errors"
	"reflect"
	"testing"
)

func TestAccessControlEntryRecords(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, "")
	rec := AccessControlEntryRecord{ID: NewTopicID(), ResourceType: 2, ResourceName: "t", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 3, PermissionType: 3}
	before := c.Image().ACLs
	im := apply(t, c, rec)
	if got := im.ACLs[rec.ID]; got == nil || *got != rec {
		t.Fatalf("binding after AccessControlEntryRecord: %+v", got)
	}
	if len(before) != 0 {
		t.Fatal("the earlier image's ACL map was changed")
	}
	if !reflect.DeepEqual(cloneImage(t, im).ACLs, im.ACLs) {
		t.Fatal("ACL bindings do not survive a snapshot")
	}
	if _, err := c.Apply(t.Context(), rec); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("a second binding with the same ID: %v", err)
	}
	c.Close()
	c = open(t, dir, "")
	defer c.Close()
	if got := c.Image().ACLs[rec.ID]; got == nil || *got != rec {
		t.Fatalf("binding after reopening: %+v", got)
	}
	im = apply(t, c, RemoveAccessControlEntryRecord{ID: rec.ID})
	if len(im.ACLs) != 0 {
		t.Fatalf("bindings after RemoveAccessControlEntryRecord: %v", im.ACLs)
	}
	if _, err := c.Apply(t.Context(), RemoveAccessControlEntryRecord{ID: rec.ID}); !errors.Is(err, ErrUnknownACL) {
		t.Fatalf("removing an unknown binding: %v", err)
	}
}
