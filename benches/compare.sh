#!/usr/bin/env bash
# benches/compare.sh — the carrier against three baseline WebSocket servers, same machine, same
# load generator, same settings (issue 7). Writes the results table into
# BENCHMARKS.md (between the compare markers) and every raw report to
# target/compare/results.jsonl.
#
#   benches/compare.sh             # 3 alternating runs per scenario (RUNS=5 for more)
#   RUNS=1 QUICK=1 benches/compare.sh   # a fast sanity pass (fewer messages; not for the table)
#   PIN=0 benches/compare.sh       # do not pin server and client to separate CPUs
#   BEFORE_BIN=path/to/old/carrier benches/compare.sh   # also run an older carrier build
#                                  # ("carrier-before" rows: before/after of a server change)
#   REPORT_ONLY=1 benches/compare.sh   # rewrite the table from the last run's raw reports
#   SCENARIOS="text64 idle" SERVERS="carrier fastws-tuned" benches/compare.sh
#                                  # only these scenarios and servers (a partial run: the
#                                  # table it writes lacks the rest)
#
# Servers (all on 127.0.0.1, each started fresh for every run):
#   carrier      target/release/carrier serve --channel echo:echo --channel relay:relay
#   fastws-tuned benches/baselines/fws-echo --tuned — bare fastwebsockets at its best
#                (current_thread runtime, writev on, TCP_NODELAY): the ceiling
#   fastws       benches/baselines/fws-echo — bare fastwebsockets in its default configuration
#                (multi-thread runtime, writev off), kept so both ratios show
#   tungstenite  benches/baselines/tungstenite-echo — tokio-tungstenite echo
#   node-ws      benches/baselines/node-ws/echo.js — Node `ws` echo (+ bufferutil)
# Load: `cargo run --release --example loadgen` (= `carrier bench`), a fastwebsockets client.
# Syscalls: after the timed runs, one extra untimed run per scenario and server under
# `perf stat -e 'syscalls:sys_enter_*' -p PID` (SYSCALLS=0 skips it; needs perf and
# permission to trace) gives the server's syscalls per message in the detail table.
# With PIN=1 (default, needs 2+ CPUs) every server runs on CPU 0 and every client on CPU 1, so
# a tokio server gets one worker and the client never competes with it for a core.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
RUNS=${RUNS:-3}
QUICK=${QUICK:-0}
PIN=${PIN:-1}
OUT=target/compare
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
SYSCALLS_OUT=$OUT/syscalls.jsonl
SYSCALLS=${SYSCALLS:-1}
META=$OUT/meta.env
REPORT_ONLY=${REPORT_ONLY:-0}
TOKEN=compare-bench-token
LOADGEN=target/release/examples/loadgen

log() { printf '[compare] %s\n' "$*" >&2; }

wanted() { # LIST WORD — whether WORD is in the space-separated LIST (an empty LIST: everything)
  [ -z "$1" ] || [[ " $1 " == *" $2 "* ]]
}


if [ "$REPORT_ONLY" != 1 ]; then
: >"$RESULTS"
: >"$SYSCALLS_OUT"
if [ "$SYSCALLS" = 1 ] && ! perf stat -e 'syscalls:sys_enter_write' true >/dev/null 2>&1; then
  log "perf cannot count syscalls here; skipping the syscall runs"
  SYSCALLS=0
fi
# ---------------------------------------------------------------------------------------- build
log "building carrier, load generator and baselines (release)"
cargo build --release --quiet --bin carrier --example loadgen
for b in fws-echo tungstenite-echo; do
  case $b in
    fws-echo) wanted "${SERVERS:-}" fastws || wanted "${SERVERS:-}" fastws-tuned || continue ;;
    *) wanted "${SERVERS:-}" tungstenite || continue ;;
  esac
  cargo build --release --quiet --manifest-path "benches/baselines/$b/Cargo.toml" \
    --target-dir target/baselines
done
NODE_DIR=$OUT/node
mkdir -p "$NODE_DIR"
cp benches/baselines/node-ws/echo.js "$NODE_DIR/"
if [ ! -d "$NODE_DIR/node_modules/ws" ] && wanted "${SERVERS:-}" node-ws; then
  log "npm install ws bufferutil (scratch folder $NODE_DIR)"
  (cd "$NODE_DIR" && { [ -f package.json ] || echo '{"private":true}' >package.json; } &&
    npm install --silent --no-audit --no-fund ws@8 bufferutil@4)
fi

SERVER_PIN=()
CLIENT_PIN=()
if [ "$PIN" = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  SERVER_PIN=(taskset -c 0)
  CLIENT_PIN=(taskset -c 1)
fi

# -------------------------------------------------------------------------------------- servers
SPID=""
SPORT=""
start_server() { # kind
  local kind=$1 out=$OUT/server-$1.out
  : >"$out"
  case $kind in
    carrier | carrier-before)
      local bin=target/release/carrier
      [ "$kind" = carrier-before ] && bin=$BEFORE_BIN
      local more=()
      # The before build may predate bulk channels.
      [ "$kind" = carrier ] && more=(--channel bulk:echo:bulk)
      CARRIER_TOKEN=$TOKEN RUST_LOG=warn "${SERVER_PIN[@]}" "$bin" serve --port 0 \
        --channel echo:echo --channel relay:relay "${more[@]}" >"$out" 2>"$OUT/server-$kind.err" &
      ;;
    fastws) "${SERVER_PIN[@]}" target/baselines/release/fws-echo 0 >"$out" 2>/dev/null & ;;
    fastws-tuned) "${SERVER_PIN[@]}" target/baselines/release/fws-echo 0 --tuned >"$out" 2>/dev/null & ;;
    tungstenite) "${SERVER_PIN[@]}" target/baselines/release/tungstenite-echo 0 >"$out" 2>/dev/null & ;;
    node-ws) "${SERVER_PIN[@]}" node "$NODE_DIR/echo.js" 0 >"$out" 2>/dev/null & ;;
  esac
  SPID=$!
  for _ in $(seq 100); do
    SPORT=$(grep -o '"port":[0-9]*' "$out" 2>/dev/null | head -1 | cut -d: -f2 || true)
    [ -n "$SPORT" ] && return 0
    sleep 0.1
  done
  log "$kind did not start"; kill "$SPID" 2>/dev/null || true; exit 1
}

stop_server() {
  kill "$SPID" 2>/dev/null || true
  wait "$SPID" 2>/dev/null || true
}

# One load run against a fresh server: run_one SCENARIO SERVER RUN LOADGEN-ARGS...
# Run 0 is the untimed syscall-counting run (perf attached to the server).
run_one() {
  local scenario=$1 server=$2 run=$3
  shift 3
  start_server "$server"
  local extra=()
  case $server in carrier*) extra=(--token "$TOKEN") ;; esac
  extra+=(--server-pid "$SPID")
  local line perf_pid="" perf_out=$OUT/perf-$scenario-$server.csv
  if [ "$run" = 0 ]; then
    # Without warm-up, so every message counted is a message the report completed.
    local args=() skip=0 a
    for a in "$@"; do
      if [ "$skip" = 1 ]; then skip=0; continue; fi
      if [ "$a" = --warmup ]; then skip=1; continue; fi
      args+=("$a")
    done
    set -- "${args[@]}"
    perf stat -x, -e 'syscalls:sys_enter_*' -p "$SPID" -o "$perf_out" 2>/dev/null &
    perf_pid=$!
    sleep 0.5 # perf attaches before the load starts
  fi
  line=$("${CLIENT_PIN[@]}" "$LOADGEN" "ws://127.0.0.1:$SPORT/" "${extra[@]}" \
    --duration-secs 300 "$@" || true)
  if [ -n "$perf_pid" ]; then
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
  fi
  stop_server
  [ -n "$line" ] || line='{"errors":1,"first_error":"no report"}'
  if [ "$run" = 0 ]; then
    python3 - "$perf_out" "$scenario" "$server" "$line" >>"$SYSCALLS_OUT" <<'PY'
import json, sys
path, scenario, server, line = sys.argv[1:]
counts = {}
for row in open(path):
    f = row.strip().split(",")
    if len(f) > 2 and f[2].startswith("syscalls:sys_enter_") and f[0].isdigit() and int(f[0]):
        counts[f[2][len("syscalls:sys_enter_"):]] = int(f[0])
rep = json.loads(line)
done = rep.get("completed") or 0
print(json.dumps({"scenario": scenario, "server": server, "completed": done, "counts": counts}))
PY
    log "$scenario $server syscalls: $(tail -1 "$SYSCALLS_OUT" | head -c 300)"
    return
  fi
  printf '{"scenario":"%s","server":"%s","run":%d,"report":%s}\n' \
    "$scenario" "$server" "$run" "$line" >>"$RESULTS"
  log "$scenario $server run $run: $(echo "$line" | jq -c '{msgs_per_s, mb_per_s, p50_us, p99_us, errors, memory}' 2>/dev/null || echo "$line")"
}

# ------------------------------------------------------------------------------------ scenarios
# Message counts per connection (QUICK shrinks them for a sanity pass).
if [ "$QUICK" = 1 ]; then M64=100 M16K=40 M1M=20 MFAN=40 NIDLE=200; else
  # Sized so each run lasts seconds, not one: sub-second runs swung ±20 % here.
  M64=3000 M16K=1000 M1M=500 MFAN=300 NIDLE=1000; fi
MPIPE=$((M16K * 4))

scenario() { # NAME SERVER:ARGS... — runs every server RUNS times, order alternating per run
  local name=$1
  shift
  wanted "${SCENARIOS:-}" "$name" || return 0
  local specs=() spec run i
  for spec in "$@"; do
    wanted "${SERVERS:-}" "${spec%%:*}" && specs+=("$spec")
  done
  if [ -n "${BEFORE_BIN:-}" ] && [ "${NO_BEFORE:-0}" != 1 ] && wanted "${SERVERS:-}" carrier; then
    for spec in "$@"; do
      case $spec in carrier:*) specs+=("carrier-before:${spec#carrier:}") ;; esac
    done
  fi
  for run in $(seq "$RUNS"); do
    local order=("${specs[@]}")
    if [ $((run % 2)) = 0 ]; then
      order=()
      for ((i = ${#specs[@]} - 1; i >= 0; i--)); do order+=("${specs[$i]}"); done
    fi
    for spec in "${order[@]}"; do
      # shellcheck disable=SC2086
      run_one "$name" "${spec%%:*}" "$run" ${spec#*:}
    done
  done
  if [ "$SYSCALLS" = 1 ]; then
    for spec in "${specs[@]}"; do
      # shellcheck disable=SC2086
      run_one "$name" "${spec%%:*}" 0 ${spec#*:}
    done
  fi
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
log "load average before: $LOAD_BEFORE"

scenario text64 \
  "carrier:--mode rpc -c 100 -m $M64 -s 64 --warmup 50" \
  "fastws-tuned:--mode raw -c 100 -m $M64 -s 64 --warmup 50" \
  "fastws:--mode raw -c 100 -m $M64 -s 64 --warmup 50" \
  "tungstenite:--mode raw -c 100 -m $M64 -s 64 --warmup 50" \
  "node-ws:--mode raw -c 100 -m $M64 -s 64 --warmup 50"
scenario bin16k \
  "carrier:--mode channel -c 100 -m $M16K -s 16384 --warmup 20" \
  "fastws-tuned:--mode raw --binary -c 100 -m $M16K -s 16384 --warmup 20" \
  "fastws:--mode raw --binary -c 100 -m $M16K -s 16384 --warmup 20" \
  "tungstenite:--mode raw --binary -c 100 -m $M16K -s 16384 --warmup 20" \
  "node-ws:--mode raw --binary -c 100 -m $M16K -s 16384 --warmup 20"
scenario bin1m \
  "carrier:--mode channel -c 1 -m $M1M -s 1048576 --warmup 10" \
  "fastws-tuned:--mode raw --binary -c 1 -m $M1M -s 1048576 --warmup 10" \
  "fastws:--mode raw --binary -c 1 -m $M1M -s 1048576 --warmup 10" \
  "tungstenite:--mode raw --binary -c 1 -m $M1M -s 1048576 --warmup 10" \
  "node-ws:--mode raw --binary -c 1 -m $M1M -s 1048576 --warmup 10"
# Fan-out has no baseline counterpart (the baselines only echo); its target compares the
# carrier's delivered bytes/s with one bare fastwebsockets connection echoing 64 KiB.
scenario fanout64k \
  "carrier:--mode fanout -c 100 -m $MFAN -s 65536 --warmup 10" \
  "fastws-tuned:--mode raw --binary -c 1 -m $((MFAN * 10)) -s 65536 --warmup 10" \
  "fastws:--mode raw --binary -c 1 -m $((MFAN * 10)) -s 65536 --warmup 10"
# Pipelined: 16 messages in flight per connection, each echo checked in order.
scenario pipe1k \
  "carrier:--mode channel --window 16 -c 100 -m $MPIPE -s 1024 --warmup 32" \
  "fastws-tuned:--mode raw --binary --window 16 -c 100 -m $MPIPE -s 1024 --warmup 32" \
  "fastws:--mode raw --binary --window 16 -c 100 -m $MPIPE -s 1024 --warmup 32"
# Mixed: ping latency idle and beside a 256 MiB transfer on the same
# connection, on a bulk echo channel and, for contrast, the reliable (FIFO) one.
MIXB=$((256 << 20)); [ "$QUICK" = 1 ] && MIXB=$((16 << 20))
# With 4 frames in flight (256 KiB, the bench's default) and with 16 (1 MiB): what the client
# has sent ahead of a ping is read before it (TCP is one ordered stream), so only the carrier's
# outbound side can be prioritised.
NO_BEFORE=1 scenario mixed \
  "carrier:--mode mixed -c 1 -s 65536 --window 4 --transfer-bytes $MIXB --channel bulk"
NO_BEFORE=1 scenario mixed-fifo \
  "carrier:--mode mixed -c 1 -s 65536 --window 4 --transfer-bytes $MIXB --channel echo"
NO_BEFORE=1 scenario mixed16 \
  "carrier:--mode mixed -c 1 -s 65536 --window 16 --transfer-bytes $MIXB --channel bulk"
NO_BEFORE=1 scenario mixed16-fifo \
  "carrier:--mode mixed -c 1 -s 65536 --window 16 --transfer-bytes $MIXB --channel echo"
SYSCALLS_SAVED=$SYSCALLS
SYSCALLS=0 # memory runs: syscall counts say nothing there
scenario idle \
  "carrier:--mode idle -c $NIDLE -s 16384" \
  "fastws-tuned:--mode idle-raw -c $NIDLE -s 16384" \
  "fastws:--mode idle-raw -c $NIDLE -s 16384"
SYSCALLS=$SYSCALLS_SAVED

LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
log "load average after: $LOAD_AFTER"

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
MACHINE="$(nproc) CPUs ($CPU), Linux $(uname -r), $(free -g | awk '/Mem:/{print $2}') GiB RAM"
PINNING=$([ ${#SERVER_PIN[@]} -gt 0 ] && echo "server on CPU 0, client on CPU 1 (taskset)" || echo "no pinning")
for v in MACHINE PINNING RUNS LOAD_BEFORE LOAD_AFTER QUICK; do printf '%s=%q\n' "$v" "${!v}"; done >"$META"
fi

# -------------------------------------------------------------------------------------- report
# shellcheck disable=SC1090
source "$META"
export MACHINE PINNING RUNS LOAD_BEFORE LOAD_AFTER QUICK
python3 - "$RESULTS" "$SYSCALLS_OUT" BENCHMARKS.md <<'PY'
import json, os, statistics, sys, datetime

results_path, syscalls_path, md_path = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(results_path) if l.strip()]
by = {}
for r in rows:
    by.setdefault((r["scenario"], r["server"]), []).append(r["report"])
sys_rows = {}
if os.path.exists(syscalls_path):
    for l in open(syscalls_path):
        if l.strip():
            r = json.loads(l)
            sys_rows[(r["scenario"], r["server"])] = r

READS = {"read", "recvfrom", "recvmsg", "readv"}
WRITES = {"write", "writev", "sendto", "sendmsg"}

def per_msg(scn, srv, names=None):
    r = sys_rows.get((scn, srv))
    if not r or not r["completed"]:
        return None
    n = sum(v for k, v in r["counts"].items() if names is None or k in names)
    return n / r["completed"]

def med(scn, srv, key, sub=None):
    reps = by.get((scn, srv), [])
    vals = [(x.get(sub) or {}).get(key) if sub else x.get(key) for x in reps]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None

def errs(scn, srv):
    return sum(x.get("errors", 0) for x in by.get((scn, srv), []))

def fmt(v, nd=0):
    if v is None:
        return "–"
    return f"{v:,.{nd}f}"

def ratio(a, b):
    return None if a is None or not b else a / b

labels = {
    "text64": "100 conns × 64 B text (carrier: `rpc` system.ping; baselines: echo)",
    "bin16k": "100 conns × 16 KiB binary (carrier: `channel` echo)",
    "bin1m": "1 conn × 1 MiB binary (carrier: `channel` echo)",
    "fanout64k": "1 → 100 fan-out of 64 KiB (carrier: `fanout` on relay; baselines: 1 conn × 64 KiB echo)",
    "pipe1k": "100 conns × 16 in flight × 1 KiB binary (`--window 16`; carrier: `channel` echo)",
}
servers = ["carrier", "carrier-before", "fastws-tuned", "fastws", "tungstenite", "node-ws"]
out = []
out.append(f"Measured {datetime.date.today().isoformat()} on {os.environ['MACHINE']}; "
           f"{os.environ['PINNING']}; medians of {os.environ['RUNS']} alternating runs "
           f"(each run a fresh server). Load average before/after: "
           f"{os.environ['LOAD_BEFORE']} / {os.environ['LOAD_AFTER']}."
           + (" **QUICK pass: small counts, not representative.**" if os.environ.get("QUICK") == "1" else ""))
out.append("")
out.append(f"Command: `RUNS={os.environ['RUNS']} benches/compare.sh` (raw reports: `target/compare/results.jsonl`, "
           "syscall counts: `target/compare/syscalls.jsonl`). `fastws-tuned` is bare fastwebsockets "
           "at its best (current_thread runtime, writev on): the ceiling; `fastws` its default "
           "configuration. Syscalls per message come from one extra, untimed run per row under "
           "`perf stat -e 'syscalls:sys_enter_*' -p PID` (all syscalls; reads = read/recvfrom, "
           "writes = write/writev/sendto).")
out.append("")
out.append("| scenario | server | msgs/s | MB/s | p50 µs | p99 µs | max µs | server CPU µs/msg | syscalls/msg (reads · writes) | errors | carrier ÷ this (msgs/s) |")
out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for scn, label in labels.items():
    for srv in servers:
        if (scn, srv) not in by:
            continue
        m = med(scn, srv, "msgs_per_s")
        c = med(scn, "carrier", "msgs_per_s")
        if scn == "fanout64k":
            m_cmp, c_cmp = med(scn, srv, "mb_per_s"), med(scn, "carrier", "mb_per_s")
            rat = "" if srv == "carrier" else f"{fmt(ratio(c_cmp, m_cmp), 2)} (MB/s)"
        else:
            rat = "" if srv == "carrier" else fmt(ratio(c, m), 2)
        sc = per_msg(scn, srv)
        scs = "–" if sc is None else f"{sc:.2f} ({per_msg(scn, srv, READS):.2f} · {per_msg(scn, srv, WRITES):.2f})"
        out.append(f"| {label} | {srv} | {fmt(m)} | {fmt(med(scn, srv, 'mb_per_s'), 1)} | "
                   f"{fmt(med(scn, srv, 'p50_us'))} | {fmt(med(scn, srv, 'p99_us'))} | "
                   f"{fmt(med(scn, srv, 'max_us'))} | {fmt(med(scn, srv, 'server_cpu_us_per_msg'), 1)} | "
                   f"{scs} | {errs(scn, srv)} | {rat} |")
out.append("")
out.append("Idle connections (server `VmRSS` from `/proc/PID/status`; bytes per connection = "
           "(RSS with the connections − RSS before) ÷ connections):")
out.append("")
out.append("| server | connections | idle B/conn | after one 16 KiB message B/conn | errors |")
out.append("|---|---:|---:|---:|---:|")
for srv, what in [("carrier", "carrier (admitted + handshaken)"),
                  ("carrier-before", "carrier before the change (`BEFORE_BIN`)"),
                  ("fastws-tuned", "bare fastwebsockets, tuned"),
                  ("fastws", "bare fastwebsockets, default")]:
    if ("idle", srv) in by:
        n = by[("idle", srv)][0].get("connections")
        out.append(f"| {what} | {n} | {fmt(med('idle', srv, 'idle_bytes_per_conn', 'memory'))} | "
                   f"{fmt(med('idle', srv, 'after_message_bytes_per_conn', 'memory'))} | {errs('idle', srv)} |")
out.append("")

if ("mixed", "carrier") in by:
    out.append("Mixed (`carrier bench --mode mixed -c 1 -s 65536 --window W --transfer-bytes 268435456`): "
               "`system.ping` round trips on the connection before a 256 MiB echo transfer (idle, "
               "1,000 pings) and during it, on a `bulk` echo channel and on the `reliable` one (one "
               "FIFO per connection), with W frames of the transfer in flight:")
    out.append("")
    out.append("| channel | W | idle p50 µs | idle p99 µs | during p50 µs | during p99 µs | p99 during ÷ idle | transfer MB/s | errors |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for scn, what in [("mixed", "`bulk:echo:bulk` | 4"), ("mixed-fifo", "`echo:echo` (reliable, FIFO) | 4"),
                      ("mixed16", "`bulk:echo:bulk` | 16"), ("mixed16-fifo", "`echo:echo` (reliable, FIFO) | 16")]:
        if (scn, "carrier") not in by:
            continue
        g = lambda part, key: med(scn, "carrier", key, None) if part is None else statistics.median(
            [x["mixed"][part][key] for x in by[(scn, "carrier")] if x.get("mixed")] or [0])
        ratio_v = statistics.median([x["mixed"]["p99_ratio"] for x in by[(scn, "carrier")] if x.get("mixed")] or [0])
        mb = statistics.median([x["mixed"]["transfer_mb_per_s"] for x in by[(scn, "carrier")] if x.get("mixed")] or [0])
        out.append(f"| {what} | {fmt(g('idle', 'p50_us'))} | {fmt(g('idle', 'p99_us'))} | "
                   f"{fmt(g('during_transfer', 'p50_us'))} | {fmt(g('during_transfer', 'p99_us'))} | "
                   f"{ratio_v:.2f} | {mb:,.0f} | {errs(scn, 'carrier')} |")
    out.append("")

def mixed_ratio(scn):
    v = [x["mixed"]["p99_ratio"] for x in by.get((scn, "carrier"), []) if x.get("mixed")]
    return statistics.median(v) if v else None

def check(name, value, target, cmp=">="):
    if value is None:
        return f"| {name} | – | {cmp} {target} | not measured |"
    ok = value >= target if cmp == ">=" else value <= target
    return f"| {name} | {value:.2f} | {cmp} {target} | {'met' if ok else '**missed**'} |"

def r_(scn, a, b, key="msgs_per_s", sub=None):
    return ratio(med(scn, a, key, sub), med(scn, b, key, sub))

T = "fastws-tuned"
out.append("Targets against the tuned bare server (issue 14):")
out.append("")
out.append("| target (ratios of medians) | measured | target | |")
out.append("|---|---:|---:|---|")
out.append(check("16 KiB channel echo msgs/s ÷ tuned bare", r_("bin16k", "carrier", T), 0.95))
out.append(check("16 KiB channel echo: carrier syscalls/msg", per_msg("bin16k", "carrier"), 2.1, "<="))
out.append(check("64 B system.ping msgs/s ÷ tuned bare 64 B echo", r_("text64", "carrier", T), 0.8))
out.append(check("64 B system.ping p99 ÷ tuned bare p99", r_("text64", "carrier", T, "p99_us"), 1.5, "<="))
out.append(check("1 MiB channel echo msgs/s ÷ tuned bare", r_("bin1m", "carrier", T), 1.5))
out.append(check("fan-out egress MB/s ÷ tuned 1-conn 64 KiB echo egress", r_("fanout64k", "carrier", T, "mb_per_s"), 2.8))
out.append(check("RSS per idle connection ÷ tuned bare", r_("idle", "carrier", T, "idle_bytes_per_conn", "memory"), 1.3, "<="))
out.append(check("RSS per connection after 16 KiB ÷ tuned bare", r_("idle", "carrier", T, "after_message_bytes_per_conn", "memory"), 1.15, "<="))
out.append(check("pipelined 1 KiB msgs/s ÷ tuned bare", r_("pipe1k", "carrier", T), 3.0))
out.append(check("pipelined 1 KiB: carrier syscalls/msg", per_msg("pipe1k", "carrier"), 0.2, "<="))
out.append(check("mixed: ping p99 during a 256 MiB bulk transfer ÷ idle p99 (bulk channel, 4 in flight)", mixed_ratio("mixed"), 2.0, "<="))
out.append(check("mixed: the same with 16 in flight", mixed_ratio("mixed16"), 2.0, "<="))
if "carrier-before" in {s for _, s in by}:
    out.append(check("16 KiB channel echo msgs/s ÷ before", r_("bin16k", "carrier", "carrier-before"), 1.0))
    out.append(check("RSS per idle connection ÷ before", r_("idle", "carrier", "carrier-before", "idle_bytes_per_conn", "memory"), 1.0, "<="))
out.append("")
out.append("Against bare fastwebsockets in its default configuration (the earlier targets):")
out.append("")
out.append("| target (ratios of medians) | measured | target | |")
out.append("|---|---:|---:|---|")
out.append(check("channel 16 KiB echo msgs/s ÷ default bare", r_("bin16k", "carrier", "fastws"), 0.9))
out.append(check("channel 1 MiB echo msgs/s ÷ default bare", r_("bin1m", "carrier", "fastws"), 0.9))
out.append(check("rpc msgs/s at 100 conns ÷ default bare 64 B echo", r_("text64", "carrier", "fastws"), 0.6))
out.append(check("16 KiB binary ÷ tokio-tungstenite", r_("bin16k", "carrier", "tungstenite"), 1.5))
out.append(check("16 KiB binary ÷ Node ws", r_("bin16k", "carrier", "node-ws"), 5.0))
out.append(check("fan-out egress MB/s ÷ default 1-conn bare echo egress", r_("fanout64k", "carrier", "fastws", "mb_per_s"), 0.8))
out.append(check("idle memory per conn ÷ default bare", r_("idle", "carrier", "fastws", "idle_bytes_per_conn", "memory"), 1.5, "<="))
out.append(check("memory per conn after 16 KiB ÷ default bare", r_("idle", "carrier", "fastws", "after_message_bytes_per_conn", "memory"), 1.2, "<="))
out.append(check("rpc p99 ÷ default bare 64 B echo p99", r_("text64", "carrier", "fastws", "p99_us"), 2.0, "<="))

block = "\n".join(out)
begin, end = "<!-- compare:begin -->", "<!-- compare:end -->"
try:
    md = open(md_path).read()
except FileNotFoundError:
    md = f"# Benchmarks\n\n{begin}\n{end}\n"
if begin in md and end in md:
    head, rest = md.split(begin, 1)
    _, tail = rest.split(end, 1)
    md = f"{head}{begin}\n{block}\n{end}{tail}"
else:
    md = f"{md.rstrip()}\n\n{begin}\n{block}\n{end}\n"
open(md_path, "w").write(md)
print(block)
PY
