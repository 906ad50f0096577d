#!/usr/bin/env bash
# Installs Debian's chromium (headless browser of the /ui test, node/ui_test.go)
# when it is missing. Needs root (CI runs as root on a fresh Debian machine).
set -euo pipefail
if command -v chromium >/dev/null; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
command -v chromium
