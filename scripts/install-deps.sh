#!/usr/bin/env bash
# Installs what kmirror's tests need on a fresh Debian machine: kcat (librdkafka's CLI)
# from Debian's packages. Idempotent; quiet when everything is present.
set -euo pipefail
if ! command -v kcat >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kcat >/dev/null
fi
kcat -V 2>/dev/null | head -1 || true
