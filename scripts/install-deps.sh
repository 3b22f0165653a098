#!/usr/bin/env bash
# Installs what kmirror's tests need on a fresh Debian machine: kcat (librdkafka's CLI),
# chromium (the status console's headless browser test, internal/console) and tmux (the
# README tour in an 80x24 terminal, test/tour) from Debian's packages. Idempotent; quiet when everything is present.
set -euo pipefail
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
kcat -V 2>/dev/null | head -1 || true
chromium --version 2>/dev/null || true
