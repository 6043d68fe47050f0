#!/usr/bin/env bash
# Installs Debian's Chromium for tests/browser.rs, which drives it headless over the DevTools
# protocol (so no chromedriver). Idempotent and quiet: a working browser is left as it is; apt's
# output is shown only when an install fails. A browser that cannot be installed fails CI here,
# and tests/browser.rs fails (never skips) without one.
set -euo pipefail

browser=/usr/bin/chromium
if "$browser" --version >/dev/null 2>&1; then
  echo "browser: $("$browser" --version 2>/dev/null)"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq chromium; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-browser: could not install chromium" >&2
  exit 1
fi
echo "browser: $("$browser" --version 2>/dev/null)"
