package storage

// The file-descriptor budget of the log directory: every open segment holds
// FilesPerSegment descriptors, so the number of partitions (and segments) a broker may
// hold is bounded by RLIMIT_NOFILE. The broker checks the budget before it creates
// partitions and before it opens a data directory at start (docs/storage.md).

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// FilesPerSegment is the descriptors one open segment holds: its .log, .index,
// .timeindex and .txnindex files.
const FilesPerSegment = 4

// ErrFileLimit is returned when an operation would need more file descriptors than
// RLIMIT_NOFILE leaves; the broker answers KAFKA_STORAGE_ERROR with its message.
type ErrFileLimit struct {
	What  string // what needs them: "creating 3000 partitions", "opening 600 segments"
	Need  uint64 // descriptors needed in all: open now + the operation's + the reserve
	Limit uint64 // the soft RLIMIT_NOFILE
}

func (e *ErrFileLimit) Error() string {
	return fmt.Sprintf("%s needs %d file descriptors (%d per segment, with %d kept for connections), above RLIMIT_NOFILE %d: raise it to at least %d (ulimit -n)",
		e.What, e.Need, FilesPerSegment, fileReserve(e.Limit), e.Limit, e.Need)
}

// RaiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit, as many servers do at
// start (Go's runtime does it too since 1.19; this states it and reports the values).
// It returns the soft limit now in force and the hard limit.
func RaiseFileLimit() (soft, hard uint64, err error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, 0, err
	}
	if r.Cur < r.Max {
		want := r
		want.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
			r = want
		}
	}
	return r.Cur, r.Max, nil
}

// fileReserve is the descriptors kept out of the log directory's budget for client
// connections, the metadata log and transient files (checkpoints, snapshots):
// a tenth of the limit, at least 64.
func fileReserve(limit uint64) uint64 { return max(64, limit/10) }

// CheckFileBudget fails with *ErrFileLimit when opening `segments` more segments (on top
// of the descriptors this process holds now) would leave fewer than the reserve under
// the soft RLIMIT_NOFILE. what names the operation in the error.
func CheckFileBudget(what string, segments int) error {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == ^uint64(0) {
		return nil // unknown or unlimited: nothing to check
	}
	open, err := openFiles()
	if err != nil {
		return nil // no /proc: the open itself reports EMFILE
	}
	need := uint64(open) + uint64(segments)*FilesPerSegment + fileReserve(r.Cur)
	if need > r.Cur {
		return &ErrFileLimit{What: what, Need: need, Limit: r.Cur}
	}
	return nil
}

// openFiles counts this process's open descriptors (/proc/self/fd).
func openFiles() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	return len(ents), nil
}

// SegmentFiles counts the segments (.log files, at least one per partition) in the
// partition directories of the log directory: the segments Open opens for them.
func (m *Manager) SegmentFiles() (int, error) {
	tps, err := m.Existing()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, tp := range tps {
		ents, err := os.ReadDir(m.partitionDir(tp))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return 0, err
		}
		segs := 0
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), logSuffix) {
				segs++
			}
		}
		n += max(segs, 1) // an empty partition directory gets its first segment
	}
	return n, nil
}
