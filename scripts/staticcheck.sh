#!/usr/bin/env bash
# Runs staticcheck at a pinned version, installed into a git-ignored cache folder.
set -euo pipefail
version=v0.8.2
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.cache/tools/staticcheck-$version
if [ ! -x "$bin" ]; then
  mkdir -p "$root/.cache/tools"
  GOBIN=$root/.cache/tools go install honnef.co/go/tools/cmd/staticcheck@$version
  mv "$root/.cache/tools/staticcheck" "$bin"
fi
exec "$bin" "$@"
