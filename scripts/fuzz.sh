#!/usr/bin/env bash
# Runs every fuzz target (func FuzzXxx) for a bounded time each: scripts/fuzz.sh 20s
set -euo pipefail
dur=${1:-20s}
cd "$(dirname "$0")/.."
grep -rl --include='*_test.go' '^func Fuzz' internal | while read -r f; do
  pkg=./$(dirname "$f")
  for t in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
    echo "fuzz $pkg $t ($dur)"
    go test -run '^$' -fuzz "^$t\$" -fuzztime "$dur" "$pkg"
  done
done
