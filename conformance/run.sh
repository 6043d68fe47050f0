#!/usr/bin/env bash
# Reproduces conformance/autobahn-summary.txt: runs the Autobahn|Testsuite fuzzing client
# (cases 1-7, 9, 10; 12-13 need compression, which the carrier does not offer) against
# examples/autobahn_echo.rs on loopback, then writes the summary and the per-case behaviors.
#   usage: conformance/run.sh [PORT]        (default 9101)
# Needs CPython 2.7 for the suite (see /work/shared/tools/autobahn.sh or $AUTOBAHN_SH); where
# none exists it prints SKIP and exits 0. Exits 1 if any case failed.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${1:-9101}
AUTOBAHN_SH=${AUTOBAHN_SH:-}
if [ -z "$AUTOBAHN_SH" ]; then
  for c in ../shared/tools/autobahn.sh /work/shared/tools/autobahn.sh; do
    [ -x "$c" ] && { AUTOBAHN_SH=$c; break; }
  done
fi
[ -n "$AUTOBAHN_SH" ] || { echo "SKIP: autobahn.sh not found (set AUTOBAHN_SH)"; exit 0; }
OUT=target/autobahn
cargo build --release --example autobahn_echo
target/release/examples/autobahn_echo "$PORT" > "$OUT.server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  grep -q listening "$OUT.server.log" 2>/dev/null && break
  sleep 0.1
done
grep -q listening "$OUT.server.log" || { echo "echo server did not start"; cat "$OUT.server.log"; exit 1; }
set +e
"$AUTOBAHN_SH" "ws://127.0.0.1:$PORT" carrier '["1.*","2.*","3.*","4.*","5.*","6.*","7.*","9.*","10.*"]' "$OUT" | tee "$OUT.summary"
STATUS=${PIPESTATUS[0]}
set -e
if [ -f "$OUT/reports/index.json" ]; then
  {
    cat "$OUT.summary"
    python3 - "$OUT/reports/index.json" <<'PY'
import json, sys, collections
d = json.load(open(sys.argv[1]))["carrier"]
key = lambda s: [int(x) for x in s.split(".")]
by_group = collections.defaultdict(collections.Counter)
for k, v in d.items():
    by_group[k.split(".")[0]][v["behavior"] + "/" + v["behaviorClose"]] += 1
for g in sorted(by_group, key=int):
    print(f"group {g}: " + ", ".join(f"{b}={n}" for b, n in sorted(by_group[g].items())))
for k in sorted(d, key=key):
    if d[k]["behavior"] not in ("OK",):
        print(f"  {k}: behavior={d[k]['behavior']} close={d[k]['behaviorClose']}")
PY
  } > conformance/autobahn-summary.txt
  python3 - "$OUT/reports/index.json" > conformance/autobahn-index.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["carrier"]
key = lambda s: [int(x) for x in s.split(".")]
trimmed = {k: {"behavior": d[k]["behavior"], "behaviorClose": d[k]["behaviorClose"],
               "remoteCloseCode": d[k].get("remoteCloseCode")} for k in sorted(d, key=key)}
print(json.dumps({"carrier": trimmed}, indent=1))
PY
fi
exit "$STATUS"
