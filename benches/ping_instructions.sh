#!/usr/bin/env bash
# benches/ping_instructions.sh — user-space instructions the server spends per `system.ping`
# round trip (carrier) or per 64 B echo (bare fastwebsockets, tuned), counted by valgrind's
# callgrind: a count, not a time, so it does not move with the machine's load, and a change of
# a few hundred instructions on the ping path shows where a five-run throughput median cannot.
#
#   benches/ping_instructions.sh                          # target/release/carrier and fws --tuned
#   BINS="path/to/old/carrier target/release/carrier" benches/ping_instructions.sh
#
# Each server runs under callgrind with one worker thread; one connection sends M1 and then,
# against a fresh server, M2 pings (closed loop, 64 B), and the figure is
# (instructions at M2 − instructions at M1) ÷ (M2 − M1): start-up and handshake cancel out.
# The kernel's share (most of a ping's cost: BENCHMARKS.md) is not counted. Needs valgrind; a
# few seconds per server at the default counts. Loopback only.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
M1=${M1:-2000}
M2=${M2:-12000}
BINS=${BINS:-target/release/carrier}
command -v valgrind > /dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }

cargo build --release --quiet --bin carrier --example loadgen
cargo build --release --quiet --manifest-path benches/baselines/fws-echo/Cargo.toml \
  --target-dir target/baselines
LOADGEN=target/release/examples/loadgen
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# count KIND BIN M: the server's total instructions for M round trips on one connection.
count() {
  local kind=$1 bin=$2 m=$3 spid port mode
  rm -f "$work"/cg.* "$work"/log
  if [ "$kind" = carrier ]; then
    # Builds before the Unix socket have no flag for it, and no socket.
    local flags=()
    "$bin" serve --help 2>&1 | grep -q -- --no-unix-socket && flags=(--no-unix-socket)
    CARRIER_TOKEN=ping-instructions CARRIER_THREADS=1 RUST_LOG=warn \
      valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" \
      "$bin" serve --port 0 "${flags[@]}" > "$work/log" 2> /dev/null &
    mode=rpc
  else
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" \
      target/baselines/release/fws-echo 0 --tuned > "$work/log" 2> /dev/null &
    mode=raw
  fi
  spid=$!
  port=
  for _ in $(seq 1 300); do
    port=$(grep -o '"port":[0-9]*' "$work/log" | head -1 | cut -d: -f2 || true)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "the $kind server did not start" >&2; kill "$spid"; exit 1; }
  timeout 300 "$LOADGEN" "ws://127.0.0.1:$port/" --token ping-instructions --mode "$mode" \
    -c 1 -m "$m" -s 64 --duration-secs 300 > /dev/null
  kill -TERM "$spid"
  wait "$spid" 2> /dev/null || true
  callgrind_annotate "$work"/cg.* 2> /dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}'
}

per_message() {
  local a b
  a=$(count "$1" "$2" "$M1") || true
  b=$(count "$1" "$2" "$M2") || true
  if [ -z "$a" ] || [ -z "$b" ]; then
    echo "failed"
  else
    echo $(((b - a) / (M2 - M1)))
  fi
}

printf '%-40s %s\n' server "instructions per round trip (user space)"
for bin in $BINS; do
  printf '%-40s %s\n' "$bin" "$(per_message carrier "$bin")"
done
printf '%-40s %s\n' "fws-echo --tuned" "$(per_message fws x)"
