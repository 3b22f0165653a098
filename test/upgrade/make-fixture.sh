#!/usr/bin/env bash
# Builds the data directory fixture of TestUpgradeFromSingleNodeRelease with the release
# before clusters (commit $1, default da96d91): a one-node destination that mirrored
# `orders` (3 partitions) from a one-node source and failed it over, with its own writes
# after the failover, an ordinary topic `plain` written by an idempotent producer (a
# producer-id-block file) with a consumer group's committed offsets. It writes testdata/single-node-<commit>.tar.gz and
# testdata/single-node-<commit>.json (what the test expects). Needs kcat, go and git.
set -euo pipefail
commit=${1:-da96d91}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; git -C "$root" worktree remove --force "$work/src-tree" 2>/dev/null; rm -rf "$work"' EXIT
git -C "$root" worktree add -q "$work/src-tree" "$commit"
(cd "$work/src-tree" && go build -o "$work/kmirror" ./cmd/kmirror)
KM=$work/kmirror
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
SP=$(port); DP=$(port)
"$KM" serve --listeners PLAINTEXT://127.0.0.1:$SP --log-dirs "$work/src" >"$work/src.log" 2>&1 &
"$KM" serve --listeners PLAINTEXT://127.0.0.1:$DP --log-dirs "$work/dst" \
  --override mirror.metadata.refresh.interval.ms=500 --override offsets.topic.num.partitions=4 \
  --override mirror.state.topic.num.partitions=5 >"$work/dst.log" 2>&1 &
DST_PID=$!
for p in $SP $DP; do for _ in $(seq 1 100); do kcat -b 127.0.0.1:$p -L >/dev/null 2>&1 && break; sleep 0.1; done; done
S=127.0.0.1:$SP; D=127.0.0.1:$DP
(cd "$root" && go run ../shared/checks/tools/kreq.go "$S" create-topic orders 3 1 >/dev/null)
seq 1 30 | awk '{print "k"$1":src-"$1}' | kcat -b "$S" -P -t orders -K:
printf 'bootstrap.servers=%s\n' "$S" >"$work/m.properties"
"$KM" mirrors --bootstrap-server "$D" --create --mirror m1 --mirror-config "$work/m.properties"
"$KM" mirrors --bootstrap-server "$D" --start --topics orders --mirror m1
for _ in $(seq 1 100); do
  "$KM" mirrors --bootstrap-server "$D" --describe --mirror m1 | awk 'NR>1 && NF>=7 {n++; if ($6=="0" && $7=="MIRRORING") ok++} END {exit !(n==3 && ok==3)}' && break
  sleep 0.2
done
"$KM" mirrors --bootstrap-server "$D" --stop --topics orders --mirror m1
seq 1 5 | awk '{print "k"$1":dst-"$1}' | kcat -b "$D" -P -t orders -K: -p 0
(cd "$root" && go run ../shared/checks/tools/kreq.go "$D" create-topic plain 2 1 >/dev/null)
seq 1 20 | awk '{print "k"$1":plain-"$1}' | kcat -b "$D" -P -t plain -K: -X enable.idempotence=true
# the group g1 commits offset 7 on both partitions of plain (an Empty group, as an application that stopped)
"$KM" groups --bootstrap-server "$D" reset-offsets g1 --topic plain --to-offset 7 --execute
"$KM" mirrors --bootstrap-server "$D" --describe --mirror m1 --json >"$work/describe.json"
"$KM" groups --bootstrap-server "$D" describe g1 >"$work/group.txt"
kill -TERM $DST_PID; wait $DST_PID || true
tar -C "$work/dst" -czf "$here/testdata/single-node-$commit.tar.gz" .
cp "$work/describe.json" "$here/testdata/single-node-$commit.describe.json"
cp "$work/group.txt" "$here/testdata/single-node-$commit.group.txt"
echo "wrote $here/testdata/single-node-$commit.tar.gz ($(du -h "$here/testdata/single-node-$commit.tar.gz" | cut -f1))"
