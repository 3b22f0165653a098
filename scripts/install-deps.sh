#!/usr/bin/env bash
# Installs what kmirror's tests need on a fresh Debian machine: kcat (librdkafka's CLI),
# chromium (the status console's headless browser test, internal/console), tmux (the
# README tour in an 80x24 terminal, test/tour), and for test/clients/security.sh openssl (its
# certificates), python3-venv (confluent-kafka's venv), nodejs and npm (kafkajs), maven and a
# JDK (kafka-clients; also test/interop) from Debian's packages. Idempotent; quiet when
# everything is present.
set -euo pipefail
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
kcat -V 2>/dev/null | head -1 || true
chromium --version 2>/dev/null || true
