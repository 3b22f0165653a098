#!/usr/bin/env bash
# kafka-cluster-mirrors.sh: KIP-1279's cluster mirror tool, served by
# `kmirror mirrors` (spec section 12). Runs, in order of preference:
# <repo>/bin/kmirror (a built binary next to this script), kmirror on PATH,
# or the repository's ./cmd/kmirror built with the Go toolchain (like
# `go run`, but the command keeps the caller's working directory, so that
# relative --mirror-config/--command-config paths work).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
if [ -x "$here/kmirror" ]; then
	exec "$here/kmirror" mirrors "$@"
elif command -v kmirror >/dev/null 2>&1; then
	exec kmirror mirrors "$@"
fi
bin="${TMPDIR:-/tmp}/kmirror-build-$(id -u)/kmirror"
mkdir -p "$(dirname "$bin")"
(cd "$root" && go build -o "$bin" ./cmd/kmirror)
exec "$bin" mirrors "$@"
