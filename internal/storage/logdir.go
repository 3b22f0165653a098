package storage

// Log directory failure, as Kafka's LogDirFailureChannel: an I/O error while appending,
// rolling, flushing or writing a checkpoint (ENOSPC, EIO, ...) takes the whole log
// directory offline. Its logs then refuse appends and reads with ErrLogDirOffline
// (KAFKA_STORAGE_ERROR), nothing more is written to it (no clean-shutdown marker
// either), and the next start recovers every segment (docs/storage.md).

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// ErrLogDirOffline is KAFKA_STORAGE_ERROR: the log's directory went offline after an I/O
// error; it wraps that error when returned by the failing operation.
var ErrLogDirOffline = errors.New("KAFKA_STORAGE_ERROR: the log directory is offline")

// dirHealth is the failure state of one log directory, shared by its logs; nil (a log
// opened without a Manager) never goes offline.
type dirHealth struct {
	dir    string
	logger *slog.Logger
	failed atomic.Bool
	once   sync.Once
}

// fail takes the directory offline because of err (logged once at ERROR) and returns
// ErrLogDirOffline wrapping err.
func (h *dirHealth) fail(err error) error {
	if h == nil {
		return err
	}
	h.once.Do(func() {
		h.failed.Store(true)
		h.logger.Error("log directory is offline after an I/O error: its partitions answer KAFKA_STORAGE_ERROR until the broker is restarted on it", "dir", h.dir, "err", err)
	})
	return fmt.Errorf("%w: %w", ErrLogDirOffline, err)
}

// offline reports whether the directory went offline.
func (h *dirHealth) offline() bool { return h != nil && h.failed.Load() }

// Offline reports whether the log directory went offline after an I/O error.
func (m *Manager) Offline() bool { return m.health.offline() }
