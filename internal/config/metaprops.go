package config

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/internal/storage"
)

// MetaPropertiesFile is the file that marks a formatted log directory, as in Kafka.
const MetaPropertiesFile = "meta.properties"

// MetaProperties is a log directory's meta.properties in Apache Kafka's format
// (org.apache.kafka.metadata.properties.MetaProperties).
type MetaProperties struct {
	// Version is 1 (KRaft: node.id) or 0 (ZooKeeper era: broker.id, cluster.id optional).
	Version     int
	ClusterID   string
	NodeID      int32  // -1 in a version 0 file without broker.id
	DirectoryID string // "" when absent: files written before Kafka 3.7 and by older kmirror
}

// ReadMetaProperties reads dir's meta.properties with Kafka's rules: version defaults to
// 0, a version 1 file needs cluster.id and node.id, directory.id must be a Uuid. A
// missing file is an error satisfying errors.Is(err, fs.ErrNotExist); every error names
// the file.
func ReadMetaProperties(dir string) (*MetaProperties, error) {
	path := filepath.Join(dir, MetaPropertiesFile)
	props, err := ReadProperties(path)
	if err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error { return fmt.Errorf("%s: %s", path, fmt.Sprintf(format, a...)) }
	m := &MetaProperties{ClusterID: props["cluster.id"], DirectoryID: props["directory.id"], NodeID: -1}
	if s, ok := props["version"]; ok {
		if m.Version, err = strconv.Atoi(strings.TrimSpace(s)); err != nil {
			return nil, bad("Invalid meta.properties version string '%s'", s)
		}
	}
	idKey := "node.id"
	switch m.Version {
	case 0:
		idKey = "broker.id"
	case 1:
		if m.ClusterID == "" {
			return nil, bad("cluster.id was not found.")
		}
		if _, ok := props[idKey]; !ok {
			return nil, bad("node.id was not found.")
		}
	default:
		return nil, bad("Unknown meta.properties version number %d", m.Version)
	}
	if s, ok := props[idKey]; ok {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nil, bad("Unable to read %s as a base-10 number.", idKey)
		}
		m.NodeID = int32(n)
	}
	if m.DirectoryID != "" {
		if _, err := ParseUUID(m.DirectoryID); err != nil {
			return nil, bad("Unable to read directory.id as a Uuid: %v", err)
		}
	}
	return m, nil
}

// WriteMetaProperties writes m as dir's meta.properties (version, cluster.id, node.id,
// directory.id when set) atomically: a temporary file, fsync, rename, fsync of dir.
func WriteMetaProperties(dir string, m *MetaProperties) error {
	var b strings.Builder
	fmt.Fprintf(&b, "#\n#kmirror\nversion=%d\ncluster.id=%s\n", m.Version, m.ClusterID)
	if m.Version == 0 {
		fmt.Fprintf(&b, "broker.id=%d\n", m.NodeID)
	} else {
		fmt.Fprintf(&b, "node.id=%d\n", m.NodeID)
	}
	if m.DirectoryID != "" {
		fmt.Fprintf(&b, "directory.id=%s\n", m.DirectoryID)
	}
	return storage.WriteFileAtomic(filepath.Join(dir, MetaPropertiesFile), []byte(b.String()))
}

// CheckFormatted checks dir's meta.properties when the node starts and returns its
// cluster ID. It uses node.NodeID and node.Legacy only. A Legacy node creates the file on
// first start (version 1, a random cluster ID, node.id, a random directory.id), as
// one-node kmirror always has; any other node needs `kmirror storage format` first. A
// node.id that differs from the file's, or a cluster ID that differs from
// clusterIDFromQuorum when that is not "", is an error, as Kafka's
// MetaPropertiesEnsemble.verify.
func CheckFormatted(dir string, node *Node, clusterIDFromQuorum string) (string, error) {
	path := filepath.Join(dir, MetaPropertiesFile)
	m, err := ReadMetaProperties(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && node.Legacy:
		m = &MetaProperties{Version: 1, ClusterID: RandomUUID(), NodeID: node.NodeID, DirectoryID: RandomUUID()}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		return m.ClusterID, WriteMetaProperties(dir, m)
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("log.dirs %s is not formatted: run `kmirror storage format -t <cluster-id> -c <config>` (kmirror storage random-uuid makes a cluster ID)", dir)
	case err != nil:
		return "", err
	}
	if err := m.verify(path, clusterIDFromQuorum, node.NodeID); err != nil {
		return "", err
	}
	if m.ClusterID == "" {
		return "", kafkaErrorf("%s: cluster.id was not found.", path)
	}
	return m.ClusterID, nil
}

// verify is Kafka's MetaPropertiesEnsemble.verify for one directory: the file's
// cluster.id (when clusterID is not "") and node.id (when it has one) are the expected
// ones, and its directory.id is not reserved.
func (m *MetaProperties) verify(path, clusterID string, nodeID int32) error {
	if clusterID != "" && m.ClusterID != "" && m.ClusterID != clusterID {
		return kafkaErrorf("Invalid cluster.id in: %s. Expected %s, but read %s", path, clusterID, m.ClusterID)
	}
	if m.NodeID >= 0 && m.NodeID != nodeID {
		return kafkaErrorf("Stored node id %d doesn't match previous node id %d in %s. If you moved your data, make sure your configured node id matches. If you intend to create a new node, you should remove all data in your data directories.", m.NodeID, nodeID, path)
	}
	if m.DirectoryID != "" {
		if u, _ := decodeUUID(m.DirectoryID); reservedDirectoryID(u) {
			return kafkaErrorf("Invalid reserved directory ID %s found in %s", m.DirectoryID, filepath.Dir(path))
		}
	}
	return nil
}

// RandomUUID returns a random version 4 UUID in Kafka's text form (22 characters of
// base64url without padding), never a reserved one (Uuid.RESERVED, DirectoryId's first
// 100) and never starting with '-': Kafka's Uuid.randomUuid, as `kafka-storage
// random-uuid` prints it.
func RandomUUID() string {
	for {
		var u [16]byte
		rand.Read(u[:])         // never returns an error: since Go 1.24 it crashes instead
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // IETF variant
		s := base64.RawURLEncoding.EncodeToString(u[:])
		if s[0] != '-' && !reservedDirectoryID(u) {
			return s
		}
	}
}

// ParseUUID parses a Uuid as Kafka's Uuid.fromString (base64url of 16 bytes; the
// padded 24-character form is accepted too) and returns its canonical 22-character form.
func ParseUUID(s string) (string, error) {
	u, err := decodeUUID(s)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(u[:]), nil
}

// ParseClusterID validates a cluster ID given to `kmirror storage format`: a Uuid (see
// ParseUUID) other than Kafka's reserved ones (all zeros, and the metadata topic's ID
// 0…01). It returns the canonical form; errors name the value.
func ParseClusterID(s string) (string, error) {
	u, err := decodeUUID(s)
	if err != nil {
		return "", kafkaErrorf("Cluster ID string %s does not appear to be a valid UUID: %v", s, err)
	}
	if u == [16]byte{} || u == [16]byte{15: 1} {
		return "", fmt.Errorf("cluster ID %s is a reserved UUID (Kafka's Uuid.RESERVED): use `kmirror storage random-uuid`", s)
	}
	return base64.RawURLEncoding.EncodeToString(u[:]), nil
}

func decodeUUID(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) > 24 {
		return u, kafkaErrorf("Input string with prefix `%s` is too long to be decoded as a base64 UUID", s[:24])
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSuffix(s, "=="))
	if err != nil {
		return u, kafkaErrorf("Input string `%s` is not base64url", s)
	}
	if len(b) != 16 {
		return u, kafkaErrorf("Input string `%s` decoded as %d bytes, which is not equal to the expected 16 bytes of a base64-encoded UUID", s, len(b))
	}
	copy(u[:], b)
	return u, nil
}

// reservedDirectoryID is Kafka's DirectoryId.reserved: the first 100 UUIDs (most
// significant half zero, least below 100), which include Uuid.RESERVED.
func reservedDirectoryID(u [16]byte) bool {
	for _, b := range u[:15] {
		if b != 0 {
			return false
		}
	}
	return u[15] < 100
}
