package quickstart

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// tourBinary is where the tour's commands find kmirror when the quickstart runs from the
// source tree: the path `make build` writes.
const tourBinary = "bin/kmirror"

// tourCommand is how the tour's commands run kmirror. Run from the source tree (go.mod
// and cmd/kmirror here), the quickstart's own executable — the build `go run
// ./cmd/kmirror quickstart` just made, or bin/kmirror itself — is installed as
// bin/kmirror, so that the tour works as written in a second terminal right after the
// README's first command; elsewhere it is kmirror (on PATH).
func tourCommand(out io.Writer) string {
	if _, err := os.Stat(filepath.Join("cmd", "kmirror")); err != nil {
		return "kmirror"
	}
	if _, err := os.Stat("go.mod"); err != nil {
		return "kmirror"
	}
	exe, err := os.Executable()
	if err != nil {
		return "kmirror"
	}
	if err := installCopy(exe, tourBinary); err != nil {
		fmt.Fprintf(out, "Could not install %s for the tour (%v): run make build.\n", tourBinary, err)
		return tourBinary
	}
	return tourBinary
}

// installCopy copies the executable exe to dst (atomically: a temporary file renamed),
// unless they are the same file.
func installCopy(exe, dst string) error {
	if a, err := os.Stat(exe); err == nil {
		if b, err := os.Stat(dst); err == nil && os.SameFile(a, b) {
			return nil
		}
	}
	in, err := os.Open(exe)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".kmirror-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
