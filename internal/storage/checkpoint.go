package storage

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WriteFileAtomic writes data to path as tmp → fsync → rename → fsync(dir), the way
// Kafka's CheckpointFile does, so a crash leaves the old or the new file, never a torn
// one. It returns the file system's error.
func WriteFileAtomic(path string, data []byte) error { return writeFileAtomic(path, data, true) }

// writeFileAtomic is WriteFileAtomic, without the fsyncs unless sync is set: a crash
// then leaves the old file, none, or (after a power loss) possibly a torn one, which the
// reader must detect (producer snapshots carry a CRC). A failed write removes the
// temporary file.
func writeFileAtomic(path string, data []byte, sync bool) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fail(err)
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	if !sync {
		return nil
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if err2 := d.Close(); err == nil {
		err = err2
	}
	return err
}

// writeCheckpoint writes Kafka's checkpoint text format: version 0, entry count, then one
// line per entry.
func writeCheckpoint(path string, lines []string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(lines))
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return WriteFileAtomic(path, b.Bytes())
}

// readCheckpoint reads Kafka's checkpoint text format and returns the entry lines split
// into fields, each with want fields. A missing file yields no entries.
func readCheckpoint(path string, want int) ([][]string, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "0" {
		return nil, fmt.Errorf("checkpoint %s: bad version line", path)
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("checkpoint %s: expected %s entries, found %d", path, lines[1], len(lines)-2)
	}
	out := make([][]string, 0, n)
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != want {
			return nil, fmt.Errorf("checkpoint %s: malformed line %q", path, l)
		}
		out = append(out, f)
	}
	return out, nil
}
