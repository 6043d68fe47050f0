#!/usr/bin/env bash
# Installs Debian's Chromium for cli/tests/it/browser.rs, which drives it headless over the DevTools
# protocol (so no chromedriver). CI runs it first; the browser test runs it itself (once per test
# binary) when the browser is missing. Idempotent and quiet: a working browser is left as it is;
# apt's output is shown only when an install fails.
#
# Exit codes: 0 the browser runs; 1 the install failed (apt's output on stderr); 2 it cannot be
# installed here (not root and no passwordless sudo, or no apt-get), with one line saying what to do.
set -euo pipefail

browser=/usr/bin/chromium
report() { echo "browser: $("$browser" --version 2>/dev/null)"; }
if "$browser" --version >/dev/null 2>&1; then report; exit 0; fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-browser: Chromium is missing and there is no apt-get here: install Chromium and set CARRIER_TEST_CHROMIUM to its binary" >&2
  exit 2
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  # -n: never wait for a password nobody will type.
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    # sudo drops the environment: pass the frontend setting through explicitly.
    sudo=(sudo -n env DEBIAN_FRONTEND=noninteractive)
  else
    echo "install-browser: Chromium is missing and installing it needs root or passwordless sudo: run \`sudo $0\` once (or set CARRIER_TEST_CHROMIUM to a Chromium binary)" >&2
    exit 2
  fi
fi

# One install at a time: concurrent test binaries of this checkout take the same lock (the
# script itself, which every runner can open) and find the browser installed. Another checkout
# locks its own copy; apt-get then waits on dpkg's lock.
exec 9<"$0"
if ! flock -w 1200 9; then
  echo "install-browser: gave up waiting for another install of Chromium to finish" >&2
  exit 1
fi
if "$browser" --version >/dev/null 2>&1; then report; exit 0; fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
# apt waits for dpkg's own lock (another apt run) instead of failing at once.
apt=("${sudo[@]}" apt-get -qq -o DPkg::Lock::Timeout=600)
if ! { "${apt[@]}" update && "${apt[@]}" install -y chromium; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-browser: apt-get could not install chromium (its output is above)" >&2
  exit 1
fi
report
