package metadata

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kmirror/kmirror/internal/storage"
)

// BootstrapFile is the file `kmirror storage format` writes in the log directory with
// the records the cluster's metadata log starts with (Kafka's bootstrap.checkpoint):
// one batch as EncodeBatch writes it.
const BootstrapFile = "bootstrap.checkpoint"

// WriteBootstrap writes recs to dir's BootstrapFile (atomically).
func WriteBootstrap(dir string, recs []Record) error {
	b, err := encodeBatch(recs)
	if err != nil {
		return err
	}
	return storage.WriteFileAtomic(filepath.Join(dir, BootstrapFile), b)
}

// ReadBootstrap reads dir's BootstrapFile; no file is no records.
func ReadBootstrap(dir string) ([]Record, error) {
	b, err := os.ReadFile(filepath.Join(dir, BootstrapFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	recs, err := decodeBatch(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, BootstrapFile), err)
	}
	return recs, nil
}
