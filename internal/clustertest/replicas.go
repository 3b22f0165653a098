package clustertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// LogDigest is the SHA-256 of a replica's records: the concatenated .log segment files of
// topic-partition in node's log directory, in base-offset order (replicas roll segments
// independently, so only the concatenation is comparable), and the bytes it covers. ok is
// false when the node holds no directory for the partition.
func (n *Node) LogDigest(topic string, partition int32) (digest string, size int, ok bool) {
	dir := filepath.Join(n.Props["log.dirs"], topic+"-"+strconv.Itoa(int(partition)))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", 0, false
	}
	var segs []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			segs = append(segs, e.Name())
		}
	}
	sort.Strings(segs) // base offsets are zero-padded to 20 digits
	var all bytes.Buffer
	for _, s := range segs {
		b, err := os.ReadFile(filepath.Join(dir, s))
		if err != nil {
			return "", 0, false
		}
		all.Write(b)
	}
	sum := sha256.Sum256(all.Bytes())
	return hex.EncodeToString(sum[:]), all.Len(), true
}
