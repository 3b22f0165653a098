#!/usr/bin/env bash
# readme-tour.sh: runs README.md's first command and then its five-minute tour, as written,
# the way a new user does: in a clean clone of HEAD (no bin/kmirror), the quickstart in an
# 80×24 tmux session, the tour's commands one by one in a second shell. It passes when
# every command exits as the tour says (step 3's write fails: the topic is read-only),
# the live table's lines fit 80 columns with the mirror heading on screen, and Ctrl-C
# stops the quickstart cleanly. Needs tmux, kcat, git and Go; uses the tour's ports (9091,
# 9094, 9191, 9194), which must be free. `make tour`; part of `make test`.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
for tool in tmux kcat git go; do
  command -v "$tool" >/dev/null || { echo "readme-tour: $tool is not installed (scripts/install-deps.sh)"; exit 1; }
done
for port in 9091 9094 9191 9194; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "readme-tour: port $port is in use; the tour needs it"; exit 1
  fi
done
work=$(mktemp -d)
sock="kmirror-tour-$$"
cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL readme-tour: $*"; tmux -L "$sock" capture-pane -p -t tour 2>/dev/null | tail -24 || true; exit 1; }

git clone -q --no-hardlinks "$root" "$work/kmirror"
cd "$work/kmirror"
[ ! -e bin/kmirror ] || fail "the clean clone has a bin/kmirror"

first=$(grep -m1 -oE '^go run \./cmd/kmirror quickstart' README.md) || fail "README's first command is not go run ./cmd/kmirror quickstart"
tmux -L "$sock" new-session -d -s tour -x 80 -y 24 "cd $work/kmirror && $first 2>&1; echo quickstart-exited-\$? > $work/exit; sleep 600"

# wait for the quickstart: bin/kmirror installed and the table showing my-mirror MIRRORING
for _ in $(seq 1 900); do
  if [ -x bin/kmirror ] && tmux -L "$sock" capture-pane -p -t tour | grep -q 'orders .*MIRRORING'; then break; fi
  [ -e "$work/exit" ] && fail "the quickstart exited: $(cat "$work/exit")"
  sleep 0.2
done
tmux -L "$sock" capture-pane -p -t tour | grep -q 'orders .*MIRRORING' || fail "the quickstart's table shows no MIRRORING partition"
# a reader starts the tour after the group's first commit (kgo commits every 5 s) has been
# synced to the destination (every second in the quickstart); step 4 shows both
for _ in $(seq 1 300); do
  bin/kmirror groups --bootstrap-server localhost:9094 describe orders-app >/dev/null 2>&1 && break
  sleep 0.2
done

# the tour's commands, from the README's block after "## A five-minute tour"
tour=$(awk '/^## A five-minute tour/ {t=1} t && /^```sh/ {b=1; next} b && /^```/ {exit} b {print}' README.md)
[ -n "$tour" ] || fail "no tour block in README.md"
step="" expect_fail=0 n=0
while IFS= read -r line; do
  case $line in
    '# '[0-9]*) step=${line#\# }; case $line in *fails*) expect_fail=1 ;; *) expect_fail=0 ;; esac; continue ;;
    '#'* | '') continue ;;
  esac
  n=$((n + 1))
  if out=$(bash -c "$line" 2>&1); then
    [ "$expect_fail" = 0 ] || fail "step '$step': '$line' succeeded, the tour says it fails"
  else
    [ "$expect_fail" = 1 ] || fail "step '$step': '$line' failed: $out"
  fi
  # step 6 says "wait for LAG 0": do so before going on
  case $line in
    *--describe*my-mirror-back*)
      for _ in $(seq 1 300); do
        bin/kmirror mirrors --bootstrap-server localhost:9091 --describe --mirror my-mirror-back |
          awk '/^MIRROR .*PARTITION/ {t=1; next} t && NF>=7 && ($6!="0" || $7!="MIRRORING") {bad++} END {exit bad>0}' && break
        sleep 0.2
      done ;;
  esac
done <<<"$tour"
[ "$n" -ge 10 ] || fail "only $n tour commands ran"

# the live table on the 80×24 screen: no line wider than 80, the mirror heading visible
table() { tmux -L "$sock" capture-pane -p -J -t tour | awk '/^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]  source / {t=1} t'; }
for _ in $(seq 1 100); do # the table is redrawn every second
  table | grep -q '^Mirror my-mirror-back on the source' && break
  sleep 0.2
done
screen=$(table)
[ -n "$screen" ] || fail "the live table's status line is not on the 24-line screen"
echo "$screen" | awk 'length($0) > 80 {bad=1} END {exit bad}' || fail "the live table has lines wider than 80 columns"
echo "$screen" | grep -q '^Mirror my-mirror-back on the source' || fail "the table does not show my-mirror-back after the failback"

tmux -L "$sock" send-keys -t tour C-c
for _ in $(seq 1 300); do [ -e "$work/exit" ] && break; sleep 0.2; done
# (go run itself reports the interrupt in its exit status; the quickstart says it stopped)
[ -e "$work/exit" ] && tmux -L "$sock" capture-pane -p -J -t tour | grep -q '^Stopped. The data stays in quickstart-data' ||
  fail "the quickstart did not stop cleanly on Ctrl-C"
echo "readme-tour: the README's first command and its $n tour commands ran as written in an 80×24 terminal"
