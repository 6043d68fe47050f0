#!/usr/bin/env bash
# Cross-version checks: builds an older release (default: 0.1.0, by its commit) beside the current tree
# and runs every client of each build against the server of each build:
#
#   clients: the `carrier` CLI (status --json, send, pipe, doctor), the Rust client
#            (examples/cross_version_client.rs) and the JavaScript package (js/, through
#            scripts/cross-version/js-client.mjs), each from the old and the current build;
#   servers: `carrier serve` of the old and of the current build, with an `echo` and an
#            `echo:bulk` channel and the embedded agent.
#
# Each combination must do a handshake, a prompt turn, a channel echo and a 4 MiB bulk transfer,
# and each feature that needs a newer protocol than the older side speaks must be refused,
# naming the side to update: the client's own preflight (`unsupported_feature`, component and
# recovery) when the client is the newer side, the server's announcement (`features`, and
# `system.status` compatibility for the CLI, `carrier doctor`'s recovery line) when the server
# is. Prints a table (old/new × CLI, Rust client, JS client, server) and exits 1 if a cell fails
# (the rules: scripts/cross-version/evaluate.py, checked on made-up outputs of a 1.0 and a 1.1
# build by scripts/cross-version/evaluate_test.py).
#
# Usage: scripts/cross-version.sh [--old REF] [--release] [--write] [--self] [--keep] [--resolve]
#   --old REF   the older build (default 0.1.0), checked out with `git worktree` in a temporary
#               directory and built in its own target directory. A release is named by its
#               version (`0.1.0`, or the tag `v0.1.0`, which a clone may not have): the script
#               knows each release's commit (RELEASES below). Any other REF is given to git.
#   --resolve   print the commit the old build would be made from, and exit
#   --release   build both with the release profile (default: debug, which builds faster: the
#               checks carry a few MiB and time nothing). Each build takes minutes on 2 cores.
#   --write     also write the table into docs/compatibility.md (between its markers)
#   --self      no second build: the current tree plays both sides (what CI runs, to keep the
#               script working)
#   --keep      keep the temporary directory (logs of every check) and print its path
# Environment: CARGO_TARGET_DIR (the current tree's target, default target/),
#   CROSS_VERSION_OLD_TARGET (the old build's target, default a directory in the temporary one;
#   set it to reuse an old build between runs).
# Needs: cargo, git, node 20+ and npm (js/'s dev dependency `ws`, on Node 20), python3.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# Each release by its commit, so the default resolves in any full clone: tags are not always
# fetched (a plain `git clone` of a mirror, or CI), commits are.
RELEASES=(
  "0.1.0 687167a541e6b85993e07a7a96161d219c30ef30"
)
OLD_REF=0.1.0
RESOLVE=0
PROFILE=debug
WRITE=0
SELF=0
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --old) OLD_REF="$2"; shift 2 ;;
    --release) PROFILE=release; shift ;;
    --write) WRITE=1; shift ;;
    --self) SELF=1; shift ;;
    --keep) KEEP=1; shift ;;
    --resolve) RESOLVE=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "cross-version: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# The commit a release name (0.1.0 or v0.1.0) stands for; any other ref as git resolves it.
resolve_ref() {
  local ref="$1" entry
  for entry in "${RELEASES[@]}"; do
    if [ "$ref" = "${entry%% *}" ] || [ "$ref" = "v${entry%% *}" ]; then
      ref="${entry#* }"
      break
    fi
  done
  if ! git -C "$ROOT" rev-parse --quiet --verify "$ref^{commit}"; then
    echo "cross-version: $1 is not a commit of this clone (a shallow clone? git fetch --unshallow)" >&2
    exit 2
  fi
}
OLD_COMMIT="$(resolve_ref "$OLD_REF")"
if [ "$RESOLVE" = 1 ]; then
  echo "$OLD_COMMIT"
  exit 0
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/carrier-cross-version.XXXXXX")"
OLD_DIR="$WORK/old"
NEW_TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
OLD_TARGET="${CROSS_VERSION_OLD_TARGET:-$WORK/target-old}"
TOKEN="cross-version-$RANDOM$RANDOM"
SERVER_PIDS=()
CARGO_FLAGS=()
[ "$PROFILE" = release ] && CARGO_FLAGS=(--release)

cleanup() {
  for pid in "${SERVER_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ -d "$OLD_DIR" ]; then
    git -C "$ROOT" worktree remove --force "$OLD_DIR" 2>/dev/null || true
  fi
  if [ "$KEEP" = 1 ]; then
    echo "cross-version: logs kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

say() { printf '== %s (%ss)\n' "$*" "$SECONDS" >&2; }

# --- builds ---------------------------------------------------------------------------------
build() { # DIR TARGET: the `carrier` binary and the Rust client's example
  local dir="$1" target="$2"
  (cd "$dir" && CARGO_TARGET_DIR="$target" cargo build "${CARGO_FLAGS[@]}" --quiet --locked \
    -p carrier-cli --bin carrier)
  (cd "$dir" && CARGO_TARGET_DIR="$target" cargo build "${CARGO_FLAGS[@]}" --quiet --locked \
    -p carrier --example cross_version_client)
}

say "current tree: build ($PROFILE, target $NEW_TARGET)"
build "$ROOT" "$NEW_TARGET"
NEW_BIN="$NEW_TARGET/$PROFILE/carrier"
NEW_RUST="$NEW_TARGET/$PROFILE/examples/cross_version_client"
NEW_JS="$ROOT/js"

if [ ! -d "$NEW_JS/node_modules/ws" ]; then
  say "js/: npm ci (the ws dev dependency, for Node 20)"
  (cd "$NEW_JS" && npm ci --no-audit --no-fund --silent)
fi

if [ "$SELF" = 1 ]; then
  OLD_BIN="$NEW_BIN"; OLD_RUST="$NEW_RUST"; OLD_JS="$NEW_JS"
else
  say "$OLD_REF: git worktree in $OLD_DIR"
  git -C "$ROOT" worktree add --quiet --detach "$OLD_DIR" "$OLD_COMMIT"
  # The Rust client's checks are this tree's example, built against the old library: it uses
  # only what the client offered then. A tree that lists its examples by hand gets it listed.
  cp "$ROOT/examples/cross_version_client.rs" "$OLD_DIR/examples/"
  if grep -q '^autoexamples *= *false' "$OLD_DIR/Cargo.toml"; then
    printf '\n[[example]]\nname = "cross_version_client"\npath = "examples/cross_version_client.rs"\n' \
      >>"$OLD_DIR/Cargo.toml"
  fi
  say "$OLD_REF: build ($PROFILE, target $OLD_TARGET)"
  build "$OLD_DIR" "$OLD_TARGET"
  OLD_BIN="$OLD_TARGET/$PROFILE/carrier"
  OLD_RUST="$OLD_TARGET/$PROFILE/examples/cross_version_client"
  OLD_JS="$OLD_DIR/js"
  # The same dev dependency serves the old package (`ws` only, loaded by its test kit).
  [ -e "$OLD_JS/node_modules" ] || ln -s "$NEW_JS/node_modules" "$OLD_JS/node_modules"
fi

version_of() { "$1" --version | head -n1 | awk '{print $2}'; }
OLD_VERSION="$(version_of "$OLD_BIN")"
NEW_VERSION="$(version_of "$NEW_BIN")"
[ "$SELF" = 1 ] && OLD_VERSION="$NEW_VERSION (as old)"

# --- servers --------------------------------------------------------------------------------
# Sets STARTED_PORT. Not called in a command substitution: that subshell's SERVER_PIDS would
# never reach `cleanup`, and the servers would outlive the script.
start_server() { # NAME BIN
  local name="$1" bin="$2" dir="$WORK/server-$1"
  mkdir -p "$dir/run"
  chmod 700 "$dir/run"
  XDG_RUNTIME_DIR="$dir/run" RUST_LOG=warn "$bin" serve --port 0 --token "$TOKEN" \
    --channel echo:echo --channel bulk:echo:bulk --demo-delay-ms 1 \
    </dev/null >"$dir/stdout" 2>"$dir/stderr" &
  SERVER_PIDS+=("$!")
  local i
  for i in $(seq 1 300); do
    if [ -s "$dir/stdout" ]; then
      STARTED_PORT="$(python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["port"])' <"$dir/stdout")"
      return 0
    fi
    sleep 0.1
  done
  echo "cross-version: the $name server did not listen within 30 s:" >&2
  cat "$dir/stderr" >&2
  return 1
}

say "servers: $OLD_VERSION and $NEW_VERSION"
start_server old "$OLD_BIN"
OLD_PORT="$STARTED_PORT"
start_server new "$NEW_BIN"
NEW_PORT="$STARTED_PORT"

head -c $((4 << 20)) /dev/urandom >"$WORK/bulk.bin"

# --- checks ---------------------------------------------------------------------------------
# Every command is bounded; its output and exit code are kept for the evaluation below.
run_checks() { # CLIENT(old|new) SERVER(old|new)
  local client="$1" server="$2" out="$WORK/results/$1-$2"
  local bin rust js port
  mkdir -p "$out"
  if [ "$client" = old ]; then bin="$OLD_BIN"; rust="$OLD_RUST"; js="$OLD_JS"
  else bin="$NEW_BIN"; rust="$NEW_RUST"; js="$NEW_JS"; fi
  if [ "$server" = old ]; then port="$OLD_PORT"; else port="$NEW_PORT"; fi
  local url="ws://127.0.0.1:$port/"
  # The client commands get an empty runtime directory: they find nothing but the URL given.
  mkdir -p "$out/run" && chmod 700 "$out/run"
  local env=(env XDG_RUNTIME_DIR="$out/run" RUST_LOG=warn)
  set +e
  timeout 60 "${env[@]}" "$bin" status --json "$url" --token "$TOKEN" >"$out/cli-status.json" 2>"$out/cli-status.err"
  echo $? >"$out/cli-status.rc"
  timeout 60 "${env[@]}" "$bin" send "$url" --token "$TOKEN" cross-version >"$out/cli-send.out" 2>"$out/cli-send.err"
  echo $? >"$out/cli-send.rc"
  printf 'cross-version echo' | timeout 60 "${env[@]}" "$bin" pipe "$url" --token "$TOKEN" --channel echo \
    >"$out/cli-echo.out" 2>"$out/cli-echo.err"
  echo $? >"$out/cli-echo.rc"
  timeout 120 "${env[@]}" "$bin" pipe "$url" --token "$TOKEN" --channel bulk <"$WORK/bulk.bin" \
    >"$out/cli-bulk.out" 2>"$out/cli-bulk.err"
  echo $? >"$out/cli-bulk.rc"
  # doctor finds the server through its runtime file, and checks it with the token. A doctor that
  # takes a URL is also given the server's: a 0.1 server's runtime file records no start time,
  # so a newer doctor cannot verify it and ignores it (with a warning naming this command).
  local doctor_url=()
  if "$bin" doctor --help 2>/dev/null | grep -q '\[URL\]'; then doctor_url=("$url"); fi
  timeout 120 env XDG_RUNTIME_DIR="$WORK/server-$server/run" CARRIER_TOKEN="$TOKEN" RUST_LOG=warn \
    "$bin" doctor "${doctor_url[@]}" >"$out/cli-doctor.out" 2>"$out/cli-doctor.err"
  echo $? >"$out/cli-doctor.rc"
  timeout 180 "$rust" "$url" "$TOKEN" >"$out/rust.jsonl" 2>"$out/rust.err"
  echo $? >"$out/rust.rc"
  timeout 180 node "$ROOT/scripts/cross-version/js-client.mjs" "$js" "$url" "$TOKEN" >"$out/js.jsonl" 2>"$out/js.err"
  echo $? >"$out/js.rc"
  set -e
  if cmp -s "$WORK/bulk.bin" "$out/cli-bulk.out"; then echo same >"$out/cli-bulk.cmp"; else echo differs >"$out/cli-bulk.cmp"; fi
}

for client in old new; do
  for server in old new; do
    say "clients $client → server $server"
    run_checks "$client" "$server"
  done
done

# --- evaluation and table -------------------------------------------------------------------
say "results"
set +e
python3 "$ROOT/scripts/cross-version/evaluate.py" "$WORK" "$OLD_VERSION" "$NEW_VERSION" "$OLD_REF" "$PROFILE" "$WRITE" "$ROOT"
status=$?
set -e
if [ "$status" -ne 0 ]; then
  echo "cross-version: some combination failed; rerun with --keep for every check's output" >&2
fi
exit "$status"
