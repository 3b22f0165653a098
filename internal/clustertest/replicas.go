package clustertest

import (
	"crypto/md5"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Segments are the .log segment files of one replica's partition directory, in
// base-offset order: the base offsets (from the zero-padded file names), the MD5 of each
// file, the MD5 of their concatenation (All) and its size in bytes. Kafka and kmirror
// name and lay out segment files alike, so the same comparison serves both (the KIP-1279
// prototype's log-convergence test compares the MD5 of every segment).
type Segments struct {
	Bases []int64
	MD5   []string
	All   string
	Size  int
}

// ReadSegments reads the .log segment files of the partition directory dir (a log
// directory's topic-partition folder); ok is false when dir or a segment is unreadable.
func ReadSegments(dir string) (s Segments, ok bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return s, false
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names) // base offsets are zero-padded to 20 digits
	all := md5.New()
	for _, name := range names {
		base, err := strconv.ParseInt(strings.TrimSuffix(name, ".log"), 10, 64)
		if err != nil {
			continue // not a segment (Kafka names none so)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return s, false
		}
		sum := md5.Sum(b)
		all.Write(b)
		s.Bases = append(s.Bases, base)
		s.MD5 = append(s.MD5, hex.EncodeToString(sum[:]))
		s.Size += len(b)
	}
	s.All = hex.EncodeToString(all.Sum(nil))
	return s, true
}

// LogDigest is the MD5 of a replica's records: the concatenated .log segment files of
// topic-partition in node's log directory, in base-offset order (replicas roll segments
// independently, so only the concatenation is comparable), and the bytes it covers. ok is
// false when the node holds no directory for the partition.
func (n *Node) LogDigest(topic string, partition int32) (digest string, size int, ok bool) {
	s, ok := ReadSegments(filepath.Join(n.Props["log.dirs"], topic+"-"+strconv.Itoa(int(partition))))
	return s.All, s.Size, ok
}
