#!/bin/bash
# `carrier bench --mode mixed` against two server builds in one run (issue 25): BEFORE_BIN (the
# build before inbound credit) and AFTER_BIN, each serving `bulk:echo:bulk` pinned to CPU 0,
# the client (AFTER_BIN's `bench`, the same for both) pinned to CPU 1, 4 and 16 frames in
# flight, RUNS alternating runs, a fresh server each. One JSON line per run in OUT; printed at
# the end: the medians, and the p99 ratio (during ÷ idle) of every run with its min, median and
# max.
#
#   BEFORE_BIN=/path/to/old/carrier AFTER_BIN=target/release/carrier benches/mixed_credit.sh 5
#
# HOG=CPUS runs a second CPU-bound process pinned to those CPUs (a `taskset` list) for the whole
# script, at nice HOG_NICE (default 0, the same priority as the server and the client): HOG=1 is
# "a second CPU-bound process on the other core" (the client's), HOG=0 shares the server's,
# HOG=0,1 spreads over both. It is a shell busy loop unless HOG_CMD says otherwise, e.g. a build
# over and over:
#
#   HOG=1 HOG_CMD='while :; do CARGO_TARGET_DIR=/tmp/hogbuild cargo build -q --workspace \
#     --all-targets -j2; cargo clean -q --target-dir /tmp/hogbuild; done' benches/mixed_credit.sh 6
#
# It runs in its own process group, killed with everything it started when the script ends,
# however it ends.
set -eu
RUNS=${1:-5}
: "${BEFORE_BIN:?the carrier binary built before the change}"
AFTER_BIN=${AFTER_BIN:-target/release/carrier}
OUT=${OUT:-mixed_credit.jsonl}
TOKEN=mixed-credit-bench-token
PORT=${PORT:-17471}
: > "$OUT"
if [ -n "${HOG:-}" ]; then
  setsid taskset -c "$HOG" nice -n "${HOG_NICE:-0}" sh -c "${HOG_CMD:-while :; do :; done}" &
  hog=$!
  trap 'kill -- "-$hog" 2>/dev/null || true' EXIT
  # A command that starts slowly (a build) is given time to load the core first.
  sleep "${HOG_WARMUP:-0}"
fi
for run in $(seq 1 "$RUNS"); do
  for build in before after; do
    bin=$BEFORE_BIN
    [ "$build" = after ] && bin=$AFTER_BIN
    for W in 4 16; do
      log=$(mktemp)
      taskset -c 0 "$bin" serve --port "$PORT" --token "$TOKEN" --channel bulk:echo:bulk > "$log" 2>&1 &
      spid=$!
      for _ in $(seq 1 50); do grep -q '"port"' "$log" && break; sleep 0.1; done
      res=$(timeout 120 taskset -c 1 "$AFTER_BIN" bench "ws://127.0.0.1:$PORT/" --token "$TOKEN" \
        --mode mixed -c 1 -s 65536 --window "$W" --transfer-bytes 268435456 --channel bulk \
        --server-pid "$spid" 2>/dev/null | tail -1)
      echo "{\"run\":$run,\"build\":\"$build\",\"window\":$W,\"report\":${res:-null}}" >> "$OUT"
      kill "$spid"; wait "$spid" 2>/dev/null || true
      rm -f "$log"
    done
  done
done
python3 - "$OUT" <<'EOF'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for b in ["before", "after"]:
    for w in [4, 16]:
        m = [r["report"]["mixed"] for r in rows
             if r["build"] == b and r["window"] == w and r["report"] and r["report"].get("mixed")]
        if not m:
            print(b, w, "no data")
            continue
        med = lambda f: st.median(f(x) for x in m)
        ratios = [x["p99_ratio"] for x in m]
        print(f"{b:6} W={w:2} runs={len(m)} idle p50/p99 {med(lambda x: x['idle']['p50_us'])}/"
              f"{med(lambda x: x['idle']['p99_us'])} us, during p50/p99 "
              f"{med(lambda x: x['during_transfer']['p50_us'])}/{med(lambda x: x['during_transfer']['p99_us'])} us, "
              f"{med(lambda x: x['transfer_mb_per_s']):.0f} MB/s, "
              f"pings during {min(x['transfer_pings'] for x in m)}+")
        # The ratio's spread, not only its median: one slow run is what a user meets.
        print(f"       p99 ratio per run {', '.join(f'{r:.2f}' for r in ratios)}; "
              f"min {min(ratios):.2f}, median {st.median(ratios):.2f}, max {max(ratios):.2f}")
EOF
