#!/usr/bin/env bash
# Runs every fuzz target for N seconds (default 30) from its committed seeds; exits non-zero on
# the first crash. CI calls it; the discoveries go to fuzz/target/corpus/ (not committed).
#   usage: fuzz/smoke.sh [SECONDS] [TARGET...]
# Needs cargo-fuzz (`cargo install cargo-fuzz`); RUSTC_BOOTSTRAP=1 lets a stable toolchain take
# the sanitizer flags. Prints one line per target: target, seconds, execs, execs/s.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-30}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(admission channel_frame envelope connection)
export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz is not installed: cargo install cargo-fuzz" >&2
  exit 1
fi
for t in "${TARGETS[@]}"; do
  mkdir -p "fuzz/target/corpus/$t" "fuzz/artifacts/$t"
  log="fuzz/target/smoke-$t.log"
  # -rss_limit_mb bounds memory; -timeout flags any single input that takes over 10 s (a hang).
  if ! cargo fuzz run "$t" "fuzz/target/corpus/$t" "fuzz/corpus/$t" -- \
      -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz/smoke.sh: $t FAILED (artifacts in fuzz/artifacts/$t)" >&2
    exit 1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  echo "fuzz $t: ${SECS}s, ${execs} execs, $(( execs / (SECS > 0 ? SECS : 1) )) execs/s"
done
