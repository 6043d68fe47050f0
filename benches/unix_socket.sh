#!/usr/bin/env bash
# benches/unix_socket.sh — the carrier's Unix socket beside its TCP port, in one run: the same
# `carrier serve` (release build) measured by `carrier bench` over both, alternating, and the
# open time of `carrier send` over the socket (no table read) against TCP with the owner check
# (the kernel's socket table read), as a bounded loop of runs (the dial alone, in process:
# `cargo bench --bench dial`). Prints the tables BENCHMARKS.md
# shows ("The Unix socket") and keeps the raw reports in target/unix-socket/.
#
#   benches/unix_socket.sh                  # RUNS=5 alternating runs per scenario, SENDS=200
#   RUNS=1 QUICK=1 benches/unix_socket.sh   # a fast sanity pass (fewer messages)
#   PIN=0 benches/unix_socket.sh            # do not pin server and client to separate CPUs
#
# Scenarios (as benches/compare.sh runs them): 100 connections × 64 B `rpc` (system.ping),
# 100 × 16 KiB `channel` echo, 100 × 1 KiB `channel` echo with 16 in flight (pipelined).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
RUNS=${RUNS:-5}
SENDS=${SENDS:-200}
QUICK=${QUICK:-0}
PIN=${PIN:-1}
OUT=target/unix-socket
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
OPENS=$OUT/opens.jsonl
: >"$RESULTS"
: >"$OPENS"
TOKEN=unix-socket-bench-token
BIN=target/release/carrier

log() { printf '[unix-socket] %s\n' "$*" >&2; }

log "building carrier (release)"
cargo build --release --quiet --bin carrier

SERVER_PIN=()
CLIENT_PIN=()
if [ "$PIN" = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  SERVER_PIN=(taskset -c 0)
  CLIENT_PIN=(taskset -c 1)
fi

RUNTIME=$(mktemp -d)
SPID=""
cleanup() {
  if [ -n "$SPID" ]; then kill "$SPID" 2>/dev/null || true; wait "$SPID" 2>/dev/null || true; fi
  rm -rf "$RUNTIME"
}
trap cleanup EXIT

start_server() {
  XDG_RUNTIME_DIR=$RUNTIME "${SERVER_PIN[@]}" "$BIN" serve --port 0 --token "$TOKEN" \
    --channel echo:echo --demo-delay-ms 0 >"$OUT/listening.json" 2>"$OUT/serve.log" &
  SPID=$!
  for _ in $(seq 100); do
    [ -s "$OUT/listening.json" ] && break
    sleep 0.05
  done
  PORT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$OUT/listening.json")
  SOCKET=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["socket"])' "$OUT/listening.json")
}

stop_server() {
  kill "$SPID" 2>/dev/null || true
  wait "$SPID" 2>/dev/null || true
  SPID=""
}

if [ "$QUICK" = 1 ]; then RPC_M=300; ECHO_M=100; PIPE_M=300; else RPC_M=3000; ECHO_M=1000; PIPE_M=3000; fi
SCENARIOS=(
  "rpc64|--mode rpc -c 100 -m $RPC_M -s 64"
  "echo16k|--mode channel -c 100 -m $ECHO_M -s 16384"
  "pipelined1k|--mode channel -c 100 -m $PIPE_M -s 1024 --window 16"
)

bench() { # scenario transport args…
  local scenario=$1 transport=$2
  shift 2
  local url
  if [ "$transport" = tcp ]; then url="ws://127.0.0.1:$PORT/"; else url="unix:$SOCKET"; fi
  local line
  line=$(CARRIER_TOKEN=$TOKEN "${CLIENT_PIN[@]}" "$BIN" bench "$url" "$@" --server-pid "$SPID" \
    --duration-secs 120) || { log "bench failed: $scenario $transport"; return 1; }
  printf '{"scenario":"%s","transport":"%s","report":%s}\n' "$scenario" "$transport" "$line" >>"$RESULTS"
}

for run in $(seq "$RUNS"); do
  # A fresh server every run; the transport order alternates between runs.
  start_server
  if [ $((run % 2)) = 1 ]; then ORDER=(tcp unix); else ORDER=(unix tcp); fi
  for entry in "${SCENARIOS[@]}"; do
    name=${entry%%|*}
    read -r -a args <<<"${entry#*|}"
    for transport in "${ORDER[@]}"; do
      log "run $run: $name over $transport"
      bench "$name" "$transport" "${args[@]}"
    done
  done
  stop_server
done

# The open time: whole `carrier send` runs (process start, dial, upgrade, handshake, one turn of
# the embedded agent without its demo delay), SENDS of each, alternating, against one idle
# server; the dial alone is `cargo bench --bench dial`. Over the socket the runtime file is
# found and the peer credentials read; over TCP the URL is named and the owner check reads
# /proc/net/tcp{,6}.
start_server
TABLE_LINES=$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | wc -l)
log "open time: $SENDS sends each way (socket tables: $TABLE_LINES lines)"
for i in $(seq "$SENDS"); do
  for transport in unix tcp; do
    if [ "$transport" = unix ]; then
      set -- send "o$i"
    else
      set -- send "ws://127.0.0.1:$PORT/" "o$i"
    fi
    start=$(date +%s%N)
    XDG_RUNTIME_DIR=$RUNTIME CARRIER_TOKEN=$TOKEN "${CLIENT_PIN[@]}" "$BIN" "$@" >/dev/null
    end=$(date +%s%N)
    printf '{"transport":"%s","us":%d}\n' "$transport" $(((end - start) / 1000)) >>"$OPENS"
  done
done
stop_server

python3 - "$RESULTS" "$OPENS" "$RUNS" "$TABLE_LINES" <<'PY'
import json, statistics, sys
results, opens, runs, table = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rows = {}
for line in open(results):
    r = json.loads(line)
    rows.setdefault((r["scenario"], r["transport"]), []).append(r["report"])
names = {"rpc64": "100 conns × 64 B `rpc` (system.ping)",
         "echo16k": "100 conns × 16 KiB `channel` echo",
         "pipelined1k": "100 conns × 16 in flight × 1 KiB `channel` echo"}
med = lambda xs: statistics.median(xs) if xs else float("nan")
print(f"medians of {runs} alternating runs (a fresh server each run)\n")
print("| scenario | transport | msgs/s | MB/s | p50 µs | p99 µs | server CPU µs/msg | errors | unix ÷ tcp (msgs/s) |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for key in ["rpc64", "echo16k", "pipelined1k"]:
    tcp = rows.get((key, "tcp"), [])
    unix = rows.get((key, "unix"), [])
    for transport, reports in (("tcp", tcp), ("unix", unix)):
        m = lambda k: med([x.get(k, 0) for x in reports])
        ratio = ""
        if transport == "unix" and tcp and unix:
            ratio = f"{med([x['msgs_per_s'] for x in unix]) / med([x['msgs_per_s'] for x in tcp]):.2f}"
        cpu = m("server_cpu_us_per_msg")
        print(f"| {names[key]} | {transport} | {m('msgs_per_s'):,.0f} | {m('mb_per_s'):,.1f} | {m('p50_us'):,.0f} | {m('p99_us'):,.0f} | {cpu:.1f} | {sum(x.get('errors', 0) for x in reports)} | {ratio} |")
times = {}
for line in open(opens):
    o = json.loads(line)
    times.setdefault(o["transport"], []).append(o["us"] / 1000)
print(f"\n`carrier send` wall time, {len(times.get('unix', []))} runs each way, alternating ({table} lines in /proc/net/tcp + tcp6):\n")
print("| path | median ms | p10 ms | p90 ms |")
print("|---|---:|---:|---:|")
for transport, label in (("unix", "socket (peer credentials, no table read)"), ("tcp", "TCP, owner check (table read)")):
    xs = sorted(times.get(transport, []))
    if not xs:
        continue
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))]
    print(f"| {label} | {med(xs):.2f} | {q(0.1):.2f} | {q(0.9):.2f} |")
if times.get("unix") and times.get("tcp"):
    print(f"\nmedian difference (TCP − socket): {med(times['tcp']) - med(times['unix']):.2f} ms")
PY
